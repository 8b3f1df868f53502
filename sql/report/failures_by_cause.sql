-- failures_by_cause: GPU-hours lost by jobs that ended in a week, per account, by how they
-- ended and what lost them: their last run when they did not finish, their earlier runs when
-- they were requeued.
--
-- Grain:   one row per (account, outcome, cause)
-- Reads:   job_outcomes, jobs_latest, findings
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: account, outcome, cause, jobs, gpu_h_lost
--
-- A job counts in up to two rows: what its runs before a requeue held (gpu_h_lost_requeue) is
-- cause 'requeue' (a node failure, a preemption or a requeue by hand stopped them: not the
-- application's doing); the rest of gpu_h_lost, lost when its last run did not finish, is
-- 'hardware' when job_outcomes saw an XID, ECC, row-remap or offline event on the job's GPUs
-- before it ended; else 'node' for a NODE_FAIL (the node failed under the job: not the
-- application's fault, as detectors/job_advice.py tells its owner); 'hang' when the job has
-- a hung_job finding (a hung job that reached its time limit ran out of time because it hung,
-- as `gpuledger job` tells its owner); 'scheduler' for preemptions and time limits; else
-- 'application'.

WITH ended AS (
    SELECT
        coalesce(o.account, '(none)') AS account,
        o.outcome,
        CASE
            WHEN o.hw_event_before_end THEN 'hardware'
            WHEN o.outcome = 'node_fail' THEN 'node'
            WHEN EXISTS (
                SELECT 1
                FROM findings AS f
                WHERE f.cluster = o.cluster AND f.job_id = o.job_id AND f.detector = 'hung_job'
            ) THEN 'hang'
            WHEN o.outcome IN ('preempted', 'timeout') THEN 'scheduler'
            ELSE 'application'
        END AS last_run_cause,
        -- (null in a mart an earlier version built, until `attribute` rebuilds it: none known)
        o.gpu_h_lost - coalesce(o.gpu_h_lost_requeue, 0.0) AS last_run_gpu_h,
        coalesce(o.gpu_h_lost_requeue, 0.0) AS gpu_h_lost_requeue
    FROM job_outcomes AS o
    JOIN jobs_latest AS j
        ON j.cluster = o.cluster AND j.job_id = o.job_id
    WHERE o.cluster = $cluster
        AND o.gpu_h_lost > 0
        AND epoch(j.end_ts) >= $week_start_e
        AND epoch(j.end_ts) < $week_end_e
),
lost AS (
    SELECT account, outcome, last_run_cause AS cause, last_run_gpu_h AS gpu_h
    FROM ended
    UNION ALL
    SELECT account, outcome, 'requeue' AS cause, gpu_h_lost_requeue AS gpu_h
    FROM ended
)
SELECT
    account,
    outcome,
    cause,
    count(*) AS jobs,
    sum(gpu_h) AS gpu_h_lost
FROM lost
WHERE gpu_h > 0
GROUP BY ALL
ORDER BY gpu_h_lost DESC, account, outcome, cause
