-- kueue_workloads: the Kueue workloads of one Kubernetes cluster a replay of [$since, $until)
-- runs: its GPU pods grouped into the workloads Kueue admitted as one.
--
-- Grain:   one row per workload (the GPU pods of one namespace with the same owner, job_name,
--          and the same submit time: a Kueue job's pods all carry their Workload's creation),
--          submitted in [$since, $until) or running or pending at $since
-- Reads:   jobs_latest
-- Params:
--   $cluster  the cluster
--   $since    start of the period (TIMESTAMP, UTC)
--   $until    end of the period (exclusive, on submit time)
-- Returns: job_id, user, account, partition, qos, state, submit_e, start_e, end_e,
--          time_limit_s, gpus, n_nodes, gpu_type, pods, pinned
--
-- job_id is `<namespace>/<job_name>` (`#<n>` appended when one name was submitted more than
-- once). partition is the ClusterQueue, qos the priority class. A workload started when its
-- first pod started and ended when its last pod ended (null while any is still running; one
-- that never started and waits no more ended when its record last changed); it asks for the
-- most GPUs its pods held at once (all its pods' where none ran). state: RUNNING while a pod
-- runs, else the last pod's.
-- Times are epoch seconds.

WITH pods AS (
    SELECT
        job_id,
        split_part(job_id, '/', 1) AS namespace,
        coalesce(job_name, 'Pod/' || split_part(job_id, '/', 2)) AS owner,
        user,
        account,
        partition,
        qos,
        state,
        coalesce(least(submit_ts, start_ts), submit_ts, start_ts) AS submitted,
        start_ts,
        end_ts,
        updated_ts,
        time_limit_s,
        coalesce(gpus_requested, gpus, 1) AS asked,
        gpu_type,
        nodes
    FROM jobs_latest
    WHERE cluster = $cluster
        AND source = 'kubernetes'
),
-- per started pod, the GPUs of its workload's pods running or waiting when it started (itself
-- included): Kueue admits a workload's pods together, so a worker not scheduled yet holds
-- quota beside the running ones. A pod holds from its start (one that never started, from its
-- submit) to its end; one that never started and waits no more (deleted, preempted while
-- pending) to its record's last change; one still pending for good.
held AS (
    SELECT
        *,
        coalesce(start_ts, submitted) AS held_from,
        coalesce(
            end_ts,
            CASE WHEN start_ts IS NULL AND upper(state) <> 'PENDING' THEN updated_ts END
        ) AS held_until
    FROM pods
),
concurrent AS (
    SELECT
        p.*,
        CASE
            WHEN p.start_ts IS NOT NULL THEN (
                SELECT sum(q.asked)
                FROM held AS q
                WHERE q.namespace = p.namespace
                    AND q.owner = p.owner
                    AND q.submitted IS NOT DISTINCT FROM p.submitted
                    AND q.asked > 0
                    AND q.held_from <= p.start_ts
                    AND (q.held_until IS NULL OR q.held_until > p.start_ts)
            )
        END AS together
    FROM held AS p
),
workloads AS (
    SELECT
        namespace || '/' || owner AS name,
        min(user) AS user,
        min(account) AS account,
        min(partition) AS partition,
        min(qos) AS qos,
        CASE
            WHEN bool_or(start_ts IS NOT NULL AND end_ts IS NULL) THEN 'RUNNING'
            ELSE arg_max(state, coalesce(end_ts, submitted))
        END AS state,
        submitted,
        min(start_ts) AS start_ts,
        CASE
            WHEN bool_or(start_ts IS NOT NULL AND end_ts IS NULL) THEN NULL
            -- never started, and no pod waits any more (deleted, preempted while pending):
            -- it left the queue when its record last changed
            WHEN min(start_ts) IS NULL AND bool_and(upper(state) <> 'PENDING')
                THEN max(coalesce(end_ts, updated_ts))
            ELSE max(end_ts)
        END AS end_ts,
        min(time_limit_s) AS time_limit_s,
        -- the GPUs its pods held at once: a failed pod's replacement, or a generation admitted
        -- again after a preemption, asks for the same GPUs again, not more (summed, a 4-GPU
        -- workload asked for 8 and never fit its 4-GPU quota); all its pods' where none ran
        CAST(coalesce(max(together), sum(asked)) AS BIGINT) AS gpus,
        count(DISTINCT n.node) AS n_nodes,
        min(gpu_type) AS gpu_type,
        count(DISTINCT job_id) AS pods
    FROM concurrent AS pods
    LEFT JOIN LATERAL (SELECT unnest(coalesce(pods.nodes, [])) AS node) AS n ON TRUE
    WHERE asked > 0
    GROUP BY namespace, owner, submitted
)

SELECT
    CASE
        WHEN count(*) OVER (PARTITION BY name) > 1
            THEN name || '#' || row_number() OVER (PARTITION BY name ORDER BY submitted)
        ELSE name
    END AS job_id,
    coalesce(user, '') AS user,
    coalesce(account, '') AS account,
    coalesce(partition, '') AS partition,
    coalesce(qos, '') AS qos,
    coalesce(state, '') AS state,
    epoch(submitted) AS submit_e,
    epoch(start_ts) AS start_e,
    epoch(end_ts) AS end_e,
    time_limit_s,
    gpus,
    greatest(n_nodes, 1) AS n_nodes,
    gpu_type,
    pods,
    coalesce(start_ts < $since, false) AS pinned
FROM workloads
WHERE submitted IS NOT NULL
    AND submitted < $until
    AND (
        submitted >= $since
        OR end_ts IS NULL
        OR end_ts > $since
    )
ORDER BY submit_e, job_id
