-- job_outcomes: how each job ended, the GPU-hours lost when it did not finish, and whether a
-- hardware event on one of its GPUs came first (application resilience).
--
-- Grain:   one row per (cluster, job_id) of jobs that started
-- Reads:   job_usage, jobs_latest, job_gpu_intervals, gpu_events, xid_classes
-- Params:
--   $grace_s  a hardware event up to this many seconds after a job's end still counts
-- Returns: cluster, job_id, user, account, state, outcome, failed, timed_out, preempted,
--          requeued, alloc_gpu_h, gpu_h_lost, hw_event_before_end, hw_event_kinds
--
-- Hardware events: ECC double-bit errors, row-remap failures, GPUs going offline, and XIDs that
-- NVIDIA classes FATAL (plus XID 94, a contained ECC error). Application XIDs (13, 31, 43…) are not.

WITH hw_events AS (
    SELECT
        e.cluster,
        e.node,
        e.gpu_index,
        e.ts,
        e.kind || CASE WHEN e.kind = 'xid' THEN ' ' || CAST(e.code AS VARCHAR) ELSE '' END AS what
    FROM gpu_events AS e
    LEFT JOIN xid_classes AS x
        ON e.kind = 'xid' AND x.xid = e.code
    WHERE e.kind IN ('ecc_dbe', 'row_remap_failure', 'offline')
        OR (e.kind = 'xid' AND (x.severity = 'FATAL' OR e.code = 94))
),
job_hw AS (
    SELECT
        i.cluster,
        i.job_id,
        string_agg(DISTINCT h.what, ', ' ORDER BY h.what) AS kinds
    FROM job_gpu_intervals AS i
    JOIN hw_events AS h
        ON h.cluster = i.cluster
        AND h.node = i.node
        AND (i.gpu_index IS NULL OR h.gpu_index = i.gpu_index)
        AND epoch(h.ts) >= i.start_e
        AND epoch(h.ts) <= i.end_e + $grace_s
    GROUP BY i.cluster, i.job_id
),
classified AS (
    SELECT
        u.cluster,
        u.job_id,
        u.user,
        u.account,
        u.state,
        CASE
            WHEN u.state IS NULL THEN 'unknown'
            WHEN u.state LIKE 'COMPLETED%' THEN 'completed'
            WHEN u.state LIKE 'CANCELLED%' THEN 'cancelled'
            WHEN u.state LIKE 'TIMEOUT%' THEN 'timeout'
            WHEN u.state LIKE 'PREEMPTED%' THEN 'preempted'
            WHEN u.state LIKE 'NODE_FAIL%' THEN 'node_fail'
            WHEN u.state LIKE 'OUT_OF_ME%' THEN 'out_of_memory'
            WHEN u.state LIKE 'FAILED%' OR u.state LIKE 'BOOT_FAIL%' THEN 'failed'
            WHEN u.state IN ('RUNNING', 'PENDING', 'SUSPENDED', 'COMPLETING') THEN 'running'
            WHEN u.state LIKE 'REQUEUE%' THEN 'requeued'
            ELSE 'other'
        END AS outcome,
        coalesce(j.requeues, 0) > 0 OR u.state LIKE 'REQUEUE%' AS requeued,
        u.alloc_gpu_h,
        h.kinds
    FROM job_usage AS u
    LEFT JOIN jobs_latest AS j
        ON j.cluster = u.cluster AND j.job_id = u.job_id
    LEFT JOIN job_hw AS h
        ON h.cluster = u.cluster AND h.job_id = u.job_id
)
SELECT
    cluster,
    job_id,
    user,
    account,
    state,
    outcome,
    outcome IN ('failed', 'node_fail', 'out_of_memory') AS failed,
    outcome = 'timeout' AS timed_out,
    outcome = 'preempted' AS preempted,
    requeued,
    alloc_gpu_h,
    CASE
        WHEN outcome IN ('failed', 'node_fail', 'out_of_memory', 'timeout', 'preempted')
            THEN alloc_gpu_h
        ELSE 0.0
    END AS gpu_h_lost,
    kinds IS NOT NULL AS hw_event_before_end,
    kinds AS hw_event_kinds
FROM classified
ORDER BY cluster, job_id
