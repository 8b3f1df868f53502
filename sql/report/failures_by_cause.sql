-- failures_by_cause: GPU-hours lost by jobs that ended in a week without finishing, per account,
-- by how they ended and whether a hardware event on their GPUs came first.
--
-- Grain:   one row per (account, outcome, cause)
-- Reads:   job_outcomes, jobs_latest
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: account, outcome, cause, jobs, gpu_h_lost
--
-- cause is 'hardware' when job_outcomes saw an XID, ECC, row-remap or offline event on the job's
-- GPUs before it ended; else 'node' for a NODE_FAIL (the node failed under the job: not the
-- application's fault, as detectors/job_advice.py tells its owner); 'scheduler' for preemptions
-- and time limits; else 'application'.

SELECT
    coalesce(o.account, '(none)') AS account,
    o.outcome,
    CASE
        WHEN o.hw_event_before_end THEN 'hardware'
        WHEN o.outcome = 'node_fail' THEN 'node'
        WHEN o.outcome IN ('preempted', 'timeout') THEN 'scheduler'
        ELSE 'application'
    END AS cause,
    count(*) AS jobs,
    sum(o.gpu_h_lost) AS gpu_h_lost
FROM job_outcomes AS o
JOIN jobs_latest AS j
    ON j.cluster = o.cluster AND j.job_id = o.job_id
WHERE o.cluster = $cluster
    AND o.gpu_h_lost > 0
    AND epoch(j.end_ts) >= $week_start_e
    AND epoch(j.end_ts) < $week_end_e
GROUP BY ALL
ORDER BY gpu_h_lost DESC, account, outcome, cause
