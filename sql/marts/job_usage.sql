-- job_usage: one line per job — what it was allocated, what it used, and what it drew.
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   jobs_latest, job_gpu_shares, job_gpu_intervals, job_gpu_daily, app_throughput,
--          gpu_models, job_co2e_hourly
-- Params:  none
-- Returns: cluster, job_id, user, account, partition, state, start_ts, end_ts, gpus, alloc_gpu_h,
--          observed_gpu_h, active_gpu_h, idle_gpu_h, effective_gpu_h, busy_mean,
--          gpu_util_pct_mean, sm_active_mean, tensor_active_mean, dram_active_mean,
--          fb_used_mib_max, energy_kwh, power_w_mean, est_tflops_mean, nvlink_gb, pcie_gb,
--          gpus_never_active, samples, app_throughput, shared, model_params,
--          tokens_per_s_per_gpu, mfu, kg_co2e, co2e_fallback_hours
--
-- alloc_gpu_h comes from the scheduler's GPU intervals (job_gpus), overlapping intervals of one
-- job on one GPU merged, and where several jobs held one GPU at once, its time split evenly
-- among them (job_gpu_shares); a job still running is counted up to the end of the cluster's
-- data; a job without job_gpus rows holds its gpus over its run (job_gpu_intervals), and one
-- the scheduler never recorded, its observed time.
-- Means are time-weighted over the samples that carry the field (DESIGN §4). shared: some of
-- the job's GPU time was on a GPU shared with other jobs at once (MPS, time-slicing), whose
-- time (observed or allocated) and energy were split evenly among the sharers (power is the
-- GPU's draw over each sharer's part of the time): the figures are estimates.
-- app_throughput is the work the job reported (collector/throughput.py, or a PromQL counter
-- pulled by `collect prometheus --throughput-query`) per second of the reports' span, from the
-- first report to the last less the gaps between the job's runs (a requeued job's wait in the
-- queue is left out): tokens/s where tokens were reported, else samples/s, else steps/s. Counters are reset-aware per
-- reporter (a drop means the process restarted from 0) and summed over the job's reporters.
-- tokens_per_s_per_gpu: the reported tokens per second of that span ÷ gpus. mfu (model FLOPs
-- utilisation, 0–1) = 6 × model_params (the largest the job reported) × tokens/s ÷ (gpus × the
-- GPU model's peak dense BF16 FLOP/s, gpu_models); null unless every GPU-day of the job was on
-- one known model and no MIG instance (a guessed peak is no figure), and null where it would
-- exceed 1 (a wrong parameter or token count; `gpuledger check` counts those jobs).
-- kg_co2e: Σ over the job's hours of kWh × that hour's g CO2e/kWh / 1000 (job_co2e_hourly);
-- null when the job has no energy data or an hour of it has no intensity configured.
-- co2e_fallback_hours: its hours with energy that the cluster's hourly CSV lacked.

WITH alloc AS (
    SELECT
        cluster,
        job_id,
        sum((end_e - start_e) * gpus * share) / 3600.0 AS alloc_gpu_h,
        sum(slot_gpus) AS slots,
        max(CASE WHEN sharers > 1 AND end_e > start_e THEN 1 ELSE 0 END) = 1 AS split
    FROM (
        SELECT
            *,
            CASE
                WHEN row_number() OVER (PARTITION BY cluster, job_id, slot ORDER BY start_e) = 1
                    THEN gpus
                ELSE 0
            END AS slot_gpus
        FROM job_gpu_shares
    ) AS numbered
    GROUP BY cluster, job_id
),
-- A count that is no count (NaN, infinite or below 0: an application's or another tool's
-- report, which the spool reader lands as it is) is unknown, and a parameter count of 0 or
-- less is none: a NaN made tokens/s NaN, and a negative count a negative MFU (-185 %).
app_reports AS (
    SELECT
        cluster,
        job_id,
        ts,
        node,
        reporter,
        CASE WHEN tokens_total - tokens_total = 0 AND tokens_total >= 0 THEN tokens_total END
            AS tokens_total,
        CASE WHEN samples_total - samples_total = 0 AND samples_total >= 0 THEN samples_total END
            AS samples_total,
        CASE WHEN steps_total - steps_total = 0 AND steps_total >= 0 THEN steps_total END
            AS steps_total,
        CASE WHEN model_params > 0 THEN model_params END AS model_params
    FROM app_throughput
),
app_steps AS (
    SELECT
        cluster,
        job_id,
        ts,
        tokens_total,
        samples_total,
        steps_total,
        tokens_total - lag(tokens_total) OVER reporter_time AS d_tokens,
        samples_total - lag(samples_total) OVER reporter_time AS d_samples,
        steps_total - lag(steps_total) OVER reporter_time AS d_steps,
        model_params
    FROM app_reports
    WHERE coalesce(tokens_total, samples_total, steps_total, model_params) IS NOT NULL
    WINDOW reporter_time AS (
        PARTITION BY cluster, job_id, coalesce(node, ''), coalesce(reporter, '')
        ORDER BY ts
    )
),
app_sums AS (
    SELECT
        cluster,
        job_id,
        epoch(min(ts)) AS first_e,
        epoch(max(ts)) AS last_e,
        sum(CASE WHEN d_tokens < 0 THEN tokens_total ELSE d_tokens END) AS tokens,
        sum(CASE WHEN d_samples < 0 THEN samples_total ELSE d_samples END) AS samples,
        sum(CASE WHEN d_steps < 0 THEN steps_total ELSE d_steps END) AS steps,
        max(model_params) AS model_params
    FROM app_steps
    GROUP BY cluster, job_id
),
-- The job's runs: its GPU intervals merged (a requeued job has one per run, the queue between).
held_marks AS (
    SELECT
        cluster,
        job_id,
        start_e,
        end_e,
        CASE
            WHEN start_e <= max(end_e) OVER (
                PARTITION BY cluster, job_id
                ORDER BY start_e, end_e
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            ) THEN 0
            ELSE 1
        END AS is_new
    FROM job_gpu_intervals
),
held_runs AS (
    SELECT cluster, job_id, min(start_e) AS start_e, max(end_e) AS end_e
    FROM (
        SELECT
            *,
            sum(is_new) OVER (
                PARTITION BY cluster, job_id
                ORDER BY start_e, end_e
                ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
            ) AS run
        FROM held_marks
    ) AS numbered
    GROUP BY cluster, job_id, run
),
-- The gaps between the job's runs (a requeued job's waits in the queue).
held_gaps AS (
    SELECT
        cluster,
        job_id,
        end_e AS gap_start_e,
        lead(start_e) OVER (PARTITION BY cluster, job_id ORDER BY start_e) AS gap_end_e
    FROM held_runs
),
-- The reports' span, first report to last, less the gaps between the job's runs inside it (a
-- requeued job's wait in the queue is no time it worked slowly). Only the gaps: a running
-- job's reports may reach past its last sample, where its allocation is cut (the tokens
-- reported there would count over a span stopped short).
app AS (
    SELECT
        s.cluster,
        s.job_id,
        -- (least and greatest skip a null: a job with no gap joins none)
        max(s.last_e) - max(s.first_e) - coalesce(
            sum(
                CASE
                    WHEN g.gap_end_e IS NOT NULL THEN greatest(
                        least(g.gap_end_e, s.last_e) - greatest(g.gap_start_e, s.first_e), 0
                    )
                END
            ),
            0
        ) AS span_s,
        max(s.tokens) AS tokens,
        max(s.samples) AS samples,
        max(s.steps) AS steps,
        max(s.model_params) AS model_params
    FROM app_sums AS s
    LEFT JOIN held_gaps AS g
        ON g.cluster = s.cluster AND g.job_id = s.job_id AND g.gap_end_e IS NOT NULL
    GROUP BY s.cluster, s.job_id
),
peak AS (
    -- the job's GPUs' peak dense BF16 FLOP/s each, where all of them were one known model
    SELECT
        d.cluster,
        d.job_id,
        CASE
            WHEN count(DISTINCT d.model) = 1
                AND count(m.peak_bf16_dense_tflops) = count(*)
                AND count(d.mig_instance) = 0
                THEN max(m.peak_bf16_dense_tflops) * 1e12
        END AS peak_flops
    FROM job_gpu_daily AS d
    LEFT JOIN gpu_models AS m
        ON m.model = d.model
    GROUP BY d.cluster, d.job_id
),
co2e AS (
    SELECT
        cluster,
        job_id,
        CASE
            WHEN count(*) FILTER (WHERE g_per_kwh IS NULL) = 0
                THEN sum(energy_j * g_per_kwh) / 3.6e9
        END AS kg_co2e,
        count(*) FILTER (WHERE fallback) AS fallback_hours
    FROM job_co2e_hourly
    GROUP BY cluster, job_id
),
used AS (
    SELECT
        cluster,
        job_id,
        sum(samples) AS samples,
        sum(observed_s) / 3600.0 AS observed_gpu_h,
        sum(active_s) / 3600.0 AS active_gpu_h,
        sum(idle_s) / 3600.0 AS idle_gpu_h,
        sum(effective_s) / 3600.0 AS effective_gpu_h,
        sum(effective_s) / nullif(sum(busy_known_s), 0) AS busy_mean,
        sum(util_sum) / nullif(sum(util_known_s), 0) AS gpu_util_pct_mean,
        sum(sm_sum) / nullif(sum(sm_known_s), 0) AS sm_active_mean,
        sum(tensor_sum) / nullif(sum(tensor_known_s), 0) AS tensor_active_mean,
        sum(dram_sum) / nullif(sum(dram_known_s), 0) AS dram_active_mean,
        max(fb_used_mib_max) AS fb_used_mib_max,
        sum(energy_j) / 3600000.0 AS energy_kwh,
        sum(power_sum) / nullif(sum(power_known_s), 0) AS power_w_mean,
        sum(tflops_sum) / nullif(sum(tensor_known_s), 0) AS est_tflops_mean,
        sum(nvlink_bytes) / 1e9 AS nvlink_gb,
        sum(pcie_bytes) / 1e9 AS pcie_gb,
        count(DISTINCT device || '#' || coalesce(CAST(mig_instance AS VARCHAR), '')) AS devices,
        count(DISTINCT device || '#' || coalesce(CAST(mig_instance AS VARCHAR), ''))
            FILTER (WHERE active_s > 0) AS devices_active,
        sum(shared_s) > 0 AS shared
    FROM (
        SELECT
            cluster,
            job_id,
            device,
            mig_instance,
            sum(samples) AS samples,
            sum(observed_s) AS observed_s,
            sum(active_s) AS active_s,
            sum(idle_s) AS idle_s,
            sum(effective_s) AS effective_s,
            sum(busy_known_s) AS busy_known_s,
            sum(util_sum) AS util_sum,
            sum(util_known_s) AS util_known_s,
            sum(sm_sum) AS sm_sum,
            sum(sm_known_s) AS sm_known_s,
            sum(tensor_sum) AS tensor_sum,
            sum(tensor_known_s) AS tensor_known_s,
            sum(dram_sum) AS dram_sum,
            sum(dram_known_s) AS dram_known_s,
            sum(tflops_sum) AS tflops_sum,
            max(fb_used_mib_max) AS fb_used_mib_max,
            sum(energy_j) AS energy_j,
            sum(power_sum) AS power_sum,
            sum(power_known_s) AS power_known_s,
            sum(nvlink_bytes) AS nvlink_bytes,
            sum(pcie_bytes) AS pcie_bytes,
            sum(shared_s) AS shared_s
        FROM job_gpu_daily
        GROUP BY cluster, job_id, device, mig_instance
    ) AS per_device
    GROUP BY cluster, job_id
),
started AS (
    SELECT
        cluster,
        job_id,
        user,
        account,
        partition,
        state,
        start_ts,
        end_ts,
        gpus
    FROM jobs_latest
    WHERE start_ts IS NOT NULL
),
keys AS (
    SELECT cluster, job_id FROM started
    UNION
    SELECT cluster, job_id FROM alloc
    UNION
    SELECT cluster, job_id FROM used
)
SELECT
    k.cluster,
    k.job_id,
    j.user,
    j.account,
    j.partition,
    j.state,
    j.start_ts,
    j.end_ts,
    coalesce(j.gpus, a.slots, u.devices) AS gpus,
    coalesce(a.alloc_gpu_h, u.observed_gpu_h, 0) AS alloc_gpu_h,
    coalesce(u.observed_gpu_h, 0) AS observed_gpu_h,
    coalesce(u.active_gpu_h, 0) AS active_gpu_h,
    coalesce(u.idle_gpu_h, 0) AS idle_gpu_h,
    coalesce(u.effective_gpu_h, 0) AS effective_gpu_h,
    u.busy_mean,
    u.gpu_util_pct_mean,
    u.sm_active_mean,
    u.tensor_active_mean,
    u.dram_active_mean,
    u.fb_used_mib_max,
    u.energy_kwh,
    u.power_w_mean,
    u.est_tflops_mean,
    u.nvlink_gb,
    u.pcie_gb,
    -- of the GPUs telemetry covered: one no sample reported on is unknown, not idle
    coalesce(u.devices, 0) - coalesce(u.devices_active, 0) AS gpus_never_active,
    coalesce(u.samples, 0) AS samples,
    coalesce(p.tokens, p.samples, p.steps) / nullif(p.span_s, 0) AS app_throughput,
    coalesce(u.shared, FALSE) OR coalesce(a.split, FALSE) AS shared,
    p.model_params,
    p.tokens / nullif(p.span_s, 0) / nullif(coalesce(j.gpus, a.slots, u.devices), 0)
        AS tokens_per_s_per_gpu,
    CASE
        WHEN 6.0 * p.model_params * p.tokens / nullif(p.span_s, 0)
            <= coalesce(j.gpus, a.slots, u.devices) * f.peak_flops
            THEN 6.0 * p.model_params * p.tokens / nullif(p.span_s, 0)
                / nullif(coalesce(j.gpus, a.slots, u.devices) * f.peak_flops, 0)
    END AS mfu,
    c.kg_co2e,
    coalesce(c.fallback_hours, 0) AS co2e_fallback_hours
FROM keys AS k
LEFT JOIN started AS j
    ON j.cluster = k.cluster AND j.job_id = k.job_id
LEFT JOIN alloc AS a
    ON a.cluster = k.cluster AND a.job_id = k.job_id
LEFT JOIN used AS u
    ON u.cluster = k.cluster AND u.job_id = k.job_id
LEFT JOIN app AS p
    ON p.cluster = k.cluster AND p.job_id = k.job_id
LEFT JOIN peak AS f
    ON f.cluster = k.cluster AND f.job_id = k.job_id
LEFT JOIN co2e AS c
    ON c.cluster = k.cluster AND c.job_id = k.job_id
ORDER BY k.cluster, k.job_id
