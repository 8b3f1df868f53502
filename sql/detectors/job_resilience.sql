-- job_resilience: how each job ended, with its size and run time, for resilience findings.
--
-- Grain:   one row per (cluster, job_id) of jobs that started and ended at or after $since
-- Reads:   job_outcomes, jobs_latest
-- Params:
--   $since  ignore jobs that ended before this time (TIMESTAMP, UTC)
-- Returns: cluster, job_id, user, account, gpus, start_ts, end_ts, runtime_s, outcome, failed,
--          requeued, requeues, alloc_gpu_h, gpu_h_lost, gpu_h_lost_requeue, hw_event_before_end,
--          hw_event_kinds, interrupted
--
-- interrupted: the job was stopped by the system rather than by its own code — a node failure,
-- a requeue, or a failure that a hardware event on its GPUs preceded. These are what
-- checkpoints protect against, so they set the failure rate of the Young/Daly interval.

SELECT
    o.cluster,
    o.job_id,
    o.user,
    o.account,
    j.gpus,
    j.start_ts,
    j.end_ts,
    epoch(j.end_ts) - epoch(j.start_ts) AS runtime_s,
    o.outcome,
    o.failed,
    o.requeued,
    coalesce(j.requeues, 0) AS requeues,
    o.alloc_gpu_h,
    o.gpu_h_lost,
    coalesce(o.gpu_h_lost_requeue, 0.0) AS gpu_h_lost_requeue,  -- null: a mart built before it
    o.hw_event_before_end,
    o.hw_event_kinds,
    o.outcome = 'node_fail' OR o.requeued OR (o.failed AND o.hw_event_before_end) AS interrupted
FROM job_outcomes AS o
JOIN jobs_latest AS j
    ON j.cluster = o.cluster AND j.job_id = o.job_id
WHERE j.start_ts IS NOT NULL
    AND j.end_ts IS NOT NULL
    AND j.end_ts >= $since
ORDER BY o.cluster, o.job_id
