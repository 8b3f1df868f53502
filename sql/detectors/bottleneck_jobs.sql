-- bottleneck_jobs: the jobs whose bottleneck a detect run reports, with who ran them.
--
-- Grain:   one row per (cluster, job_id) that started in [$since, $now) with telemetry
-- Reads:   job_usage
-- Params:
--   $since  inclusive lower bound on job start (TIMESTAMP, UTC)
--   $now    exclusive upper bound on job start
-- Returns: cluster, job_id, user, account, start_ts, end_ts, gpus, alloc_gpu_h, busy_mean

SELECT
    cluster,
    job_id,
    user,
    account,
    start_ts,
    end_ts,
    gpus,
    alloc_gpu_h,
    busy_mean
FROM job_usage
WHERE start_ts >= $since
    AND start_ts < $now
    AND samples > 0
ORDER BY cluster, job_id
