-- pending_backlog: the jobs still queued at the end of a week, per account — how many, the
-- GPU-hours they ask for (GPUs × time limit), and how many had waited more than 24 hours.
--
-- Grain:   one row per account with a job queued at the week's end
-- Reads:   jobs_latest
-- Params:
--   $cluster     cluster name
--   $week_end_e  end of the week (epoch seconds, exclusive)
-- Returns: account, jobs_pending, gpus_pending, backlog_gpu_h, jobs_no_limit, waiting_over_24h,
--          oldest_wait_h
--
-- Queued at T: submitted before T and neither started nor ended by T. A job with no time limit
-- adds no backlog GPU-hours (counted in jobs_no_limit).
-- Only jobs that asked for GPUs count (a CPU job, gpus 0, is no GPU demand: `collect slurm`
-- lands every job of the cluster); a job whose GPUs no record gives counts.

SELECT
    coalesce(account, '(none)') AS account,
    count(*) AS jobs_pending,
    CAST(sum(coalesce(gpus_requested, gpus, 0)) AS BIGINT) AS gpus_pending,
    sum(coalesce(gpus_requested, gpus, 0) * coalesce(time_limit_s, 0)) / 3600.0 AS backlog_gpu_h,
    count(*) FILTER (WHERE time_limit_s IS NULL) AS jobs_no_limit,
    count(*) FILTER (WHERE $week_end_e - epoch(submit_ts) > 86400) AS waiting_over_24h,
    max($week_end_e - epoch(submit_ts)) / 3600.0 AS oldest_wait_h
FROM jobs_latest
WHERE cluster = $cluster
    AND epoch(submit_ts) < $week_end_e
    AND coalesce(greatest(gpus_requested, gpus) > 0, TRUE)
    AND (start_ts IS NULL OR epoch(start_ts) >= $week_end_e)
    AND (end_ts IS NULL OR epoch(end_ts) >= $week_end_e)
GROUP BY coalesce(account, '(none)')
ORDER BY backlog_gpu_h DESC, account
