-- job_outcomes: how each job ended, the GPU-hours lost to its runs that were thrown away (the
-- last one when it did not finish, earlier ones when it was requeued), and whether a hardware
-- event on one of its GPUs came first (application resilience).
--
-- Grain:   one row per (cluster, job_id) of jobs that started
-- Reads:   job_usage, jobs_latest, job_gpus, job_gpu_shares, job_gpu_intervals, gpu_events,
--          xid_classes
-- Params:
--   $grace_s  a hardware event up to this many seconds after a job's end still counts
-- Returns: cluster, job_id, user, account, state, outcome, failed, timed_out, preempted,
--          requeued, alloc_gpu_h, gpu_h_lost_requeue, gpu_h_lost, hw_event_before_end,
--          hw_event_kinds
--
-- gpu_h_lost is the total lost: all of alloc_gpu_h when the job ended failed, out of memory,
-- by a node failure, a time limit or a preemption, or its latest record is itself a run that
-- was requeued (state REQUEUED); else gpu_h_lost_requeue. gpu_h_lost_requeue is the part of
-- alloc_gpu_h (the same allocation pieces, shares of GPUs held with other jobs included) that
-- the job held before its last run started, for jobs the scheduler says were requeued
-- (requeues > 0, or a REQUEUE state): a job requeued twice and then completed lost its first
-- two runs. The last run starts at the job's start_ts, or at the latest start of an allocation
-- row the scheduler recorded with its run's start (mapping scontrol-idx, whole-node, trace,
-- sim), whichever is later: Slurm and Kubernetes give start_ts as the latest run's (a pod
-- re-created under its name, after a Kueue requeue), the Philly trace as its first attempt's.
-- A job requeued and now pending again (no start_ts) lost all it held. Only allocation rows
-- count: a requeue the lake holds no earlier rows of (a container restarted in its pod, a run
-- the Slurm collector never saw running) adds nothing. Whether the application resumed from
-- a checkpoint is not known: gpu_h_lost_requeue is what a restart from scratch would lose.
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
-- each job's scheduler record, and for a requeued job the start of its last run (epoch s; NULL:
-- every run it had was requeued)
records AS (
    SELECT
        j.cluster,
        j.job_id,
        j.requeues,
        coalesce(j.requeues, 0) > 0 OR coalesce(j.state, '') LIKE 'REQUEUE%' AS was_requeued,
        CASE
            WHEN j.start_ts IS NOT NULL AND coalesce(j.state, '') NOT LIKE 'REQUEUE%'
                THEN greatest(epoch(j.start_ts), coalesce(r.start_e, epoch(j.start_ts)))
        END AS last_run_e
    FROM jobs_latest AS j
    LEFT JOIN (
        SELECT
            cluster,
            job_id,
            max(epoch(start_ts)) AS start_e
        FROM job_gpus
        WHERE mapping IN ('scontrol-idx', 'whole-node', 'trace', 'sim')
        GROUP BY cluster, job_id
    ) AS r
        ON r.cluster = j.cluster AND r.job_id = j.job_id
),
requeue_loss AS (
    SELECT
        s.cluster,
        s.job_id,
        sum(
            greatest(least(s.end_e, coalesce(q.last_run_e, s.end_e)) - s.start_e, 0)
            * s.gpus * s.share
        ) / 3600.0 AS gpu_h
    FROM job_gpu_shares AS s
    JOIN records AS q
        ON q.cluster = s.cluster AND q.job_id = s.job_id
    WHERE q.was_requeued
    GROUP BY s.cluster, s.job_id
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
        coalesce(q.gpu_h, 0.0) AS requeue_gpu_h,
        h.kinds
    FROM job_usage AS u
    LEFT JOIN records AS j
        ON j.cluster = u.cluster AND j.job_id = u.job_id
    LEFT JOIN requeue_loss AS q
        ON q.cluster = u.cluster AND q.job_id = u.job_id
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
    CASE WHEN outcome = 'requeued' THEN alloc_gpu_h ELSE requeue_gpu_h END AS gpu_h_lost_requeue,
    CASE
        WHEN outcome IN (
            'failed', 'node_fail', 'out_of_memory', 'timeout', 'preempted', 'requeued'
        ) THEN alloc_gpu_h
        ELSE requeue_gpu_h
    END AS gpu_h_lost,
    kinds IS NOT NULL AS hw_event_before_end,
    kinds AS hw_event_kinds
FROM classified
ORDER BY cluster, job_id
