-- demand_by_account: how long each account's jobs waited in the queue during a week, so fairness
-- is judged only over accounts that wanted more than they got.
--
-- Grain:   one row per account with a job pending at some time in the week
-- Reads:   jobs_latest
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds, Monday 00:00 UTC)
--   $week_end_e    end of the week (exclusive)
-- Returns: account, jobs_pending, pending_job_h, max_pending_gpus
--
-- A job is pending from submit to start (or to its end when it never started, e.g. cancelled
-- in the queue; to the week's end while still queued). pending_job_h is the part inside the week.
-- Only jobs that asked for GPUs count (a CPU job, gpus 0, is no GPU demand: `collect slurm`
-- lands every job of the cluster); a job whose GPUs no record gives counts.

WITH pending AS (
    SELECT
        coalesce(account, '(none)') AS account,
        job_id,
        coalesce(gpus_requested, gpus, 0) AS gpus,
        greatest(epoch(submit_ts), $week_start_e) AS from_e,
        least(coalesce(epoch(start_ts), epoch(end_ts), $week_end_e), $week_end_e) AS to_e
    FROM jobs_latest
    WHERE cluster = $cluster
        AND submit_ts IS NOT NULL
        AND coalesce(greatest(gpus_requested, gpus) > 0, TRUE)
)
SELECT
    account,
    count(*) AS jobs_pending,
    sum(to_e - from_e) / 3600.0 AS pending_job_h,
    max(gpus) AS max_pending_gpus
FROM pending
WHERE to_e > from_e
GROUP BY account
ORDER BY account
