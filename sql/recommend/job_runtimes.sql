-- job_runtimes: run time against time limit for every finished GPU job in the window.
--
-- Grain:   one row per (cluster, job_id) that started in [$since, $until) and has ended
-- Reads:   jobs_latest
-- Params:
--   $since  inclusive lower bound on job start (TIMESTAMP, UTC)
--   $until  exclusive upper bound on job start
-- Returns: cluster, job_id, user, account, partition, state, gpus, runtime_s, time_limit_s
--
-- Jobs without GPUs are left out (their limits block no GPU). time_limit_s is null for an
-- unlimited job.

SELECT
    cluster,
    job_id,
    user,
    account,
    partition,
    state,
    coalesce(gpus, 1) AS gpus,
    epoch(end_ts) - epoch(start_ts) AS runtime_s,
    time_limit_s
FROM jobs_latest
WHERE start_ts >= $since
    AND start_ts < $until
    AND end_ts IS NOT NULL
    AND coalesce(gpus, 1) > 0
ORDER BY cluster, job_id
