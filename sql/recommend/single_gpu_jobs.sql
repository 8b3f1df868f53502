-- single_gpu_jobs: one-GPU jobs of the window with what they used, for MIG/MPS packing.
--
-- Grain:   one row per (cluster, job_id) with one GPU that started in [$since, $until)
-- Reads:   job_usage, jobs_latest, job_gpu_daily, gpu_models
-- Params:
--   $since  inclusive lower bound on job start (TIMESTAMP, UTC)
--   $until  exclusive upper bound on job start
-- Returns: cluster, job_id, user, account, partition, interactive, model, fb_total_mib,
--          alloc_gpu_h, busy_mean, fb_used_mib_max, node
--
-- fb_total_mib is the GPU model's memory (gpu_models), 81920 MiB where the model is unknown.
-- Jobs without telemetry (busy_mean null) are left out: their use is unknown.

WITH job_model AS (
    SELECT
        cluster,
        job_id,
        min(model) AS model,
        min(node) AS node
    FROM job_gpu_daily
    GROUP BY cluster, job_id
)
SELECT
    u.cluster,
    u.job_id,
    u.user,
    u.account,
    u.partition,
    coalesce(j.interactive, false) AS interactive,
    m.model,
    coalesce(g.fb_total_mib, 81920) AS fb_total_mib,
    u.alloc_gpu_h,
    u.busy_mean,
    u.fb_used_mib_max,
    m.node
FROM job_usage AS u
JOIN jobs_latest AS j
    ON j.cluster = u.cluster AND j.job_id = u.job_id
LEFT JOIN job_model AS m
    ON m.cluster = u.cluster AND m.job_id = u.job_id
LEFT JOIN gpu_models AS g
    ON g.model = m.model
WHERE u.start_ts >= $since
    AND u.start_ts < $until
    AND u.gpus = 1
    AND u.busy_mean IS NOT NULL
ORDER BY u.cluster, u.job_id
