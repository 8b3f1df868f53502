-- job_profiles: one line per job with its usage, request and the limits of its GPU model.
--
-- Grain:   one row per (cluster, job_id) of jobs that started and were running at or after $since
-- Reads:   job_usage, jobs_latest, job_gpu_daily, gpus, gpu_models
-- Params:
--   $since  ignore jobs that ended before this time (TIMESTAMP, UTC)
-- Returns: cluster, job_id, user, account, partition, state, job_name, start_ts, end_ts,
--          runtime_s, time_limit_s, gpus, alloc_gpu_h, observed_gpu_h, active_gpu_h,
--          idle_gpu_h, effective_gpu_h, busy_mean, sm_active_mean, fb_used_mib_max,
--          power_w_mean, energy_kwh, model, fb_total_mib, power_limit_w, idle_power_w,
--          on_mig (it ran on MIG instances: its figures are of slices, not whole GPUs),
--          model_params, tokens_per_s_per_gpu, mfu, cluster_seen_frac
--
-- runtime_s is end - start for a finished job, null while it runs. The GPU model is the one
-- most of the job's GPU-time ran on; memory and power limits come from the inventory (gpus)
-- where it knows them, else from the shipped model table. cluster_seen_frac: the share of the
-- job's run (to the end of its cluster's data) in which the cluster's other GPUs reported, on
-- average (cluster_occupancy's GPUs reporting in each bucket, less the job's own): 0 where the
-- cluster had no telemetry then (none yet, or every exporter down), null where it has none at
-- all or the job held every GPU of it.

WITH job_model AS (
    SELECT
        d.cluster,
        d.job_id,
        arg_max(d.model, d.observed_s) AS model,
        max(coalesce(g.fb_total_mib, m.fb_total_mib)) AS fb_total_mib,
        max(coalesce(g.power_limit_w, m.power_limit_w)) AS power_limit_w,
        max(m.idle_power_w) AS idle_power_w,
        bool_or(d.mig_instance IS NOT NULL) AS on_mig
    FROM job_gpu_daily AS d
    LEFT JOIN gpus AS g
        ON g.cluster = d.cluster AND g.node = d.node AND g.gpu_index = d.gpu_index
    LEFT JOIN gpu_models AS m
        ON m.model = d.model
    GROUP BY d.cluster, d.job_id
),
-- per cluster and bucket: the GPUs that reported and all of them, the bucket's end, and up to
-- that end the GPU-seconds reported, the GPU-seconds of the fleet and the seconds covered
seen AS (
    SELECT
        cluster,
        bucket,
        reporting,
        gpus_total,
        epoch(bucket) + width_s AS end_e,
        sum(reporting * width_s) OVER w AS seen_gs,
        sum(gpus_total * width_s) OVER w AS total_gs,
        sum(width_s) OVER w AS covered_s
    FROM (
        SELECT
            cluster,
            bucket,
            greatest(gpus_total - gpus_unobserved, 0) AS reporting,
            gpus_total,
            epoch(coalesce(
                lead(bucket) OVER b - bucket, bucket - lag(bucket) OVER b, INTERVAL 0 SECOND
            )) AS width_s
        FROM cluster_occupancy
        WINDOW b AS (PARTITION BY cluster ORDER BY bucket)
    )
    WINDOW w AS (PARTITION BY cluster ORDER BY bucket ROWS UNBOUNDED PRECEDING)
),
runs AS (
    SELECT
        u.cluster,
        u.job_id,
        u.alloc_gpu_h,
        u.observed_gpu_h,
        epoch(u.start_ts) AS start_e,
        coalesce(epoch(u.end_ts), e.end_e) AS end_e
    FROM job_usage AS u
    LEFT JOIN cluster_data_end AS e
        ON e.cluster = u.cluster
    WHERE u.start_ts IS NOT NULL
        AND (u.end_ts IS NULL OR u.end_ts >= $since)
),
-- over the run: each sum up to its end less up to its start (up to a time t: to the end of
-- t's bucket, less the part of the bucket after t)
spans AS (
    SELECT
        r.cluster,
        r.job_id,
        r.end_e - r.start_e AS span_s,
        coalesce(b.seen_gs - b.reporting * greatest(b.end_e - r.end_e, 0), 0)
            - coalesce(a.seen_gs - a.reporting * greatest(a.end_e - r.start_e, 0), 0) AS seen_gs,
        coalesce(b.total_gs - b.gpus_total * greatest(b.end_e - r.end_e, 0), 0)
            - coalesce(a.total_gs - a.gpus_total * greatest(a.end_e - r.start_e, 0), 0)
            AS total_gs,
        coalesce(b.covered_s - greatest(b.end_e - r.end_e, 0), 0)
            - coalesce(a.covered_s - greatest(a.end_e - r.start_e, 0), 0) AS covered_s,
        r.alloc_gpu_h * 3600.0 AS alloc_gs,
        r.observed_gpu_h * 3600.0 AS observed_gs
    FROM runs AS r
    ASOF LEFT JOIN seen AS a
        ON a.cluster = r.cluster AND to_timestamp(r.start_e) >= a.bucket
    ASOF LEFT JOIN seen AS b
        ON b.cluster = r.cluster AND to_timestamp(r.end_e) >= b.bucket
),
-- the other GPUs' reported share while the fleet was covered, times the covered part of the run
run_seen AS (
    SELECT
        cluster,
        job_id,
        (seen_gs - observed_gs) / nullif(total_gs - alloc_gs * covered_s / span_s, 0)
            * covered_s / span_s AS cluster_seen_frac
    FROM spans
    WHERE span_s > 0
)
SELECT
    u.cluster,
    u.job_id,
    u.user,
    u.account,
    u.partition,
    u.state,
    j.job_name,
    u.start_ts,
    u.end_ts,
    epoch(u.end_ts) - epoch(u.start_ts) AS runtime_s,
    j.time_limit_s,
    u.gpus,
    u.alloc_gpu_h,
    u.observed_gpu_h,
    u.active_gpu_h,
    u.idle_gpu_h,
    u.effective_gpu_h,
    u.busy_mean,
    u.sm_active_mean,
    u.fb_used_mib_max,
    u.power_w_mean,
    u.energy_kwh,
    m.model,
    m.fb_total_mib,
    m.power_limit_w,
    m.idle_power_w,
    coalesce(m.on_mig, FALSE) AS on_mig,
    u.model_params,
    u.tokens_per_s_per_gpu,
    u.mfu,
    CASE WHEN c.cluster IS NOT NULL THEN least(greatest(v.cluster_seen_frac, 0), 1) END
        AS cluster_seen_frac
FROM job_usage AS u
LEFT JOIN jobs_latest AS j
    ON j.cluster = u.cluster AND j.job_id = u.job_id
LEFT JOIN job_model AS m
    ON m.cluster = u.cluster AND m.job_id = u.job_id
LEFT JOIN run_seen AS v
    ON v.cluster = u.cluster AND v.job_id = u.job_id
LEFT JOIN (SELECT DISTINCT cluster FROM cluster_occupancy) AS c
    ON c.cluster = u.cluster
WHERE u.start_ts IS NOT NULL
    AND (u.end_ts IS NULL OR u.end_ts >= $since)
ORDER BY u.cluster, u.job_id
