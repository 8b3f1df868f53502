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
-- job's run (to the end of its cluster's data) in which the cluster's GPUs reported, on
-- average (cluster_occupancy's observed share of each bucket): 0 where the cluster had no
-- telemetry then (none yet, or every exporter down), null where it has none at all.

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
-- per cluster and bucket: the observed share of its GPUs, the bucket's end, and the seconds the
-- cluster's GPUs reported (share × width) up to that end, summed over the buckets before
seen AS (
    SELECT
        cluster,
        bucket,
        share,
        epoch(bucket) + width_s AS end_e,
        sum(share * width_s)
            OVER (PARTITION BY cluster ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS seen_s
    FROM (
        SELECT
            cluster,
            bucket,
            coalesce(1 - gpus_unobserved / nullif(gpus_total, 0), 0) AS share,
            epoch(coalesce(
                lead(bucket) OVER w - bucket, bucket - lag(bucket) OVER w, INTERVAL 0 SECOND
            )) AS width_s
        FROM cluster_occupancy
        WINDOW w AS (PARTITION BY cluster ORDER BY bucket)
    )
),
runs AS (
    SELECT
        u.cluster,
        u.job_id,
        epoch(u.start_ts) AS start_e,
        coalesce(epoch(u.end_ts), e.end_e) AS end_e
    FROM job_usage AS u
    LEFT JOIN cluster_data_end AS e
        ON e.cluster = u.cluster
    WHERE u.start_ts IS NOT NULL
),
-- the seconds reported up to a time t: those to the end of t's bucket, less the part of it
-- after t
run_seen AS (
    SELECT
        r.cluster,
        r.job_id,
        (
            coalesce(b.seen_s - b.share * greatest(b.end_e - r.end_e, 0), 0)
            - coalesce(a.seen_s - a.share * greatest(a.end_e - r.start_e, 0), 0)
        ) / nullif(r.end_e - r.start_e, 0) AS cluster_seen_frac
    FROM runs AS r
    ASOF LEFT JOIN seen AS a
        ON a.cluster = r.cluster AND to_timestamp(r.start_e) >= a.bucket
    ASOF LEFT JOIN seen AS b
        ON b.cluster = r.cluster AND to_timestamp(r.end_e) >= b.bucket
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
