-- job_gpu_intervals: when each job held each GPU, overlapping intervals of one job on one GPU merged.
--
-- Grain:   one row per (cluster, job_id, slot, island) — a slot is a GPU or MIG instance
-- Reads:   job_gpus, jobs_latest, cluster_data_end (where open allocations end), gpus
-- Params:  none
-- Returns: cluster, job_id, slot, device, node, gpu_index, gpus, start_e, end_e (epoch seconds)
--
-- A job still running (end_ts null) is counted up to the end of its cluster's data
-- (cluster_data_end: its last sample's, else its scheduler records' latest time). Job steps
-- that overlap on one GPU are merged so no GPU-second is counted twice for one job. A
-- whole-node allocation (no GPU index, no UUID) holds every GPU the inventory (`gpus`) lists on
-- its node, each its own slot and device (its gpu_index stays null: it held the whole node, and
-- an event on any GPU of it hits the job), so that a job holding one of them by index at the
-- same time shares it (job_gpu_shares) rather than adding GPUs the node does not have; where
-- the inventory does not know the node's GPU indexes, it is one slot worth the node's GPUs
-- there, or 1. device names the physical GPU (or MIG instance) by node and index where the
-- index is known, so that the allocations of jobs sharing it meet there whether or not their
-- rows carry its UUID (job_gpu_shares). A job the scheduler recorded with a start and GPUs
-- (`jobs.gpus` > 0) but no `job_gpus` row with a start (its allocation was never collected)
-- holds `gpus` GPUs over its run, to its end, else the end of the data, else its last update:
-- one slot of its own (no node, no device another job can share), so every mart counts it the
-- same way; never more GPUs than the inventory lists in its cluster, where it lists any.

WITH indexed_gpus AS (
    SELECT DISTINCT
        cluster,
        node,
        gpu_index
    FROM gpus
    WHERE gpu_index IS NOT NULL
),
node_gpus AS (
    SELECT
        cluster,
        node,
        nullif(count(DISTINCT coalesce(CAST(gpu_index AS VARCHAR), gpu_uuid)), 0) AS gpus
    FROM gpus
    GROUP BY cluster, node
),
cluster_gpus AS (
    SELECT
        cluster,
        nullif(
            count(DISTINCT coalesce(node || '/' || CAST(gpu_index AS VARCHAR), gpu_uuid)), 0
        ) AS gpus
    FROM gpus
    GROUP BY cluster
),
held AS (
    -- a whole-node row once for each GPU index the inventory lists on its node (held_index)
    SELECT
        g.cluster,
        g.job_id,
        g.node,
        g.gpu_index,
        coalesce(g.gpu_index, x.gpu_index) AS held_index,
        g.gpu_uuid,
        g.mig_instance,
        g.start_ts,
        g.end_ts,
        g.gpu_index IS NULL AND g.gpu_uuid IS NULL AND x.gpu_index IS NULL AS whole
    FROM job_gpus AS g
    LEFT JOIN indexed_gpus AS x
        ON g.gpu_index IS NULL
        AND g.gpu_uuid IS NULL
        AND x.cluster = g.cluster
        AND x.node = g.node
    WHERE g.job_id IS NOT NULL  -- (another tool's row without its job holds nothing for one)
),
intervals AS (
    SELECT
        g.cluster,
        g.job_id,
        g.node,
        g.gpu_index,
        CASE WHEN g.whole THEN coalesce(n.gpus, 1) ELSE 1 END AS gpus,
        coalesce(g.gpu_uuid, g.node || '/' || coalesce(CAST(g.held_index AS VARCHAR), '*'))
            || '#' || coalesce(CAST(g.mig_instance AS VARCHAR), '') AS slot,
        coalesce(g.node || '/' || CAST(g.held_index AS VARCHAR), g.gpu_uuid, g.node || '/*')
            || '#' || coalesce(CAST(g.mig_instance AS VARCHAR), '') AS device,
        epoch(g.start_ts) AS start_e,
        -- (an end after tomorrow is none the data reached: the job's, as jobs_latest bounds
        -- it; open while the job runs)
        greatest(
            epoch(g.start_ts),
            coalesce(
                CASE
                    WHEN g.end_ts < date_trunc('day', now()) + INTERVAL 2 DAY THEN epoch(g.end_ts)
                    WHEN g.end_ts IS NOT NULL THEN epoch(j.end_ts)
                END,
                e.end_e,
                epoch(g.start_ts)
            )
        ) AS end_e
    FROM held AS g
    LEFT JOIN cluster_data_end AS e
        ON e.cluster = g.cluster
    LEFT JOIN jobs_latest AS j
        ON j.cluster = g.cluster AND j.job_id = g.job_id
    LEFT JOIN node_gpus AS n
        ON n.cluster = g.cluster AND n.node = g.node
    UNION ALL
    -- a job with GPUs and no job_gpus row: its own slot over its run
    SELECT
        j.cluster,
        j.job_id,
        CAST(NULL AS VARCHAR) AS node,
        CAST(NULL AS SMALLINT) AS gpu_index,
        least(j.gpus, coalesce(c.gpus, j.gpus)) AS gpus,
        '(job ' || j.job_id || ')' AS slot,
        '(job ' || j.job_id || ')' AS device,
        epoch(j.start_ts) AS start_e,
        greatest(
            epoch(j.start_ts), coalesce(epoch(j.end_ts), e.end_e, epoch(j.updated_ts))
        ) AS end_e
    FROM jobs_latest AS j
    LEFT JOIN cluster_data_end AS e
        ON e.cluster = j.cluster
    LEFT JOIN cluster_gpus AS c
        ON c.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
        AND j.gpus > 0
        AND NOT EXISTS (
            SELECT 1
            FROM job_gpus AS g
            WHERE g.cluster = j.cluster AND g.job_id = j.job_id AND g.start_ts IS NOT NULL
        )
),
flagged AS (
    SELECT
        cluster,
        job_id,
        slot,
        device,
        node,
        gpu_index,
        gpus,
        start_e,
        end_e,
        CASE
            WHEN start_e <= max(end_e) OVER (
                PARTITION BY cluster, job_id, slot
                ORDER BY start_e, end_e
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            ) THEN 0
            ELSE 1
        END AS is_new
    FROM intervals
),
islands AS (
    SELECT
        cluster,
        job_id,
        slot,
        device,
        node,
        gpu_index,
        gpus,
        start_e,
        end_e,
        sum(is_new) OVER (
            PARTITION BY cluster, job_id, slot
            ORDER BY start_e, end_e
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS island
    FROM flagged
)
SELECT
    cluster,
    job_id,
    slot,
    min(device) AS device,
    min(node) AS node,
    min(gpu_index) AS gpu_index,
    max(gpus) AS gpus,
    min(start_e) AS start_e,
    max(end_e) AS end_e
FROM islands
GROUP BY cluster, job_id, slot, island
