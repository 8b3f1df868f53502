-- job_gpu_intervals: when each job held each GPU, overlapping intervals of one job on one GPU merged.
--
-- Grain:   one row per (cluster, job_id, slot, island) — a slot is a GPU or MIG instance
-- Reads:   job_gpus, gpu_job_buckets, gpus
-- Params:  none
-- Returns: cluster, job_id, slot, device, node, gpu_index, gpus, start_e, end_e (epoch seconds)
--
-- A job still running (end_ts null) is counted up to the end of its cluster's data. Job steps
-- that overlap on one GPU are merged so no GPU-second is counted twice for one job. A
-- whole-node allocation (no GPU index, no UUID) is one slot worth the node's GPUs in the
-- inventory (`gpus`), or 1 where the inventory does not know the node. device names the physical
-- GPU (or MIG instance) by node and index where the index is known, so that the allocations
-- of jobs sharing it meet there whether or not their rows carry its UUID (job_gpu_shares).

WITH node_gpus AS (
    SELECT
        cluster,
        node,
        count(*) AS gpus
    FROM gpus
    GROUP BY cluster, node
),
data_end AS (
    -- the end of the cluster's last sample interval, kept per bucket so no sample is re-read
    SELECT
        cluster,
        max(interval_end_e) AS end_e
    FROM gpu_job_buckets
    GROUP BY cluster
),
intervals AS (
    SELECT
        g.cluster,
        g.job_id,
        g.node,
        g.gpu_index,
        CASE
            WHEN g.gpu_index IS NULL AND g.gpu_uuid IS NULL THEN coalesce(n.gpus, 1)
            ELSE 1
        END AS gpus,
        coalesce(g.gpu_uuid, g.node || '/' || coalesce(CAST(g.gpu_index AS VARCHAR), '*'))
            || '#' || coalesce(CAST(g.mig_instance AS VARCHAR), '') AS slot,
        coalesce(g.node || '/' || CAST(g.gpu_index AS VARCHAR), g.gpu_uuid, g.node || '/*')
            || '#' || coalesce(CAST(g.mig_instance AS VARCHAR), '') AS device,
        epoch(g.start_ts) AS start_e,
        greatest(epoch(g.start_ts), coalesce(epoch(g.end_ts), e.end_e, epoch(g.start_ts))) AS end_e
    FROM job_gpus AS g
    LEFT JOIN data_end AS e
        ON e.cluster = g.cluster
    LEFT JOIN node_gpus AS n
        ON n.cluster = g.cluster AND n.node = g.node
    WHERE g.job_id IS NOT NULL  -- (another tool's row without its job holds nothing for one)
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
