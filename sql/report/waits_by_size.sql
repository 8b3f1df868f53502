-- waits_by_size: queue wait (start − submit) of the jobs that started in a week, by account and
-- by GPU-size class (1, 2–8, more than 8 GPUs), as p50 and p95.
--
-- Grain:   one row per (account, size_class); account '(all)' rows cover every account
-- Reads:   jobs_latest
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: account, size_class, jobs, wait_p50_s, wait_p95_s, wait_max_s, over_24h
--
-- Only jobs that asked for GPUs count (a CPU job, gpus 0, is no GPU demand: `collect slurm`
-- lands every job of the cluster); a job whose GPUs no record gives counts.

WITH started AS (
    SELECT
        coalesce(account, '(none)') AS account,
        CASE
            WHEN coalesce(gpus, 0) <= 1 THEN '1 GPU'
            WHEN gpus <= 8 THEN '2-8 GPUs'
            ELSE '>8 GPUs'
        END AS size_class,
        greatest(epoch(start_ts) - epoch(coalesce(submit_ts, start_ts)), 0) AS wait_s
    FROM jobs_latest
    WHERE cluster = $cluster
        AND epoch(start_ts) >= $week_start_e
        AND epoch(start_ts) < $week_end_e
        AND coalesce(greatest(gpus_requested, gpus) > 0, TRUE)
)
SELECT
    coalesce(account, '(all)') AS account,
    size_class,
    count(*) AS jobs,
    quantile_cont(wait_s, 0.5) AS wait_p50_s,
    quantile_cont(wait_s, 0.95) AS wait_p95_s,
    max(wait_s) AS wait_max_s,
    count(*) FILTER (WHERE wait_s > 86400) AS over_24h
FROM started
GROUP BY GROUPING SETS ((account, size_class), (size_class))
ORDER BY account, size_class
