-- sample_owners: the owner of each sample by the allocation rule of DESIGN §4.
--
-- Grain:   one row per (cluster, node, gpu_index, gpu_uuid, mig_instance, ts, label) of
--          unowned_samples that some allocation covers and owner (several where several jobs
--          claim the sample and the row carries none of them)
-- Reads:   unowned_samples (gpu_samples rows as their source wrote them), job_gpus
-- Params:  none
-- Returns: cluster, node, gpu_index, gpu_uuid, mig_instance, ts, label (the row's own job_id),
--          job_id (the owner), owner_end (the latest end of the owner's allocations covering
--          the sample, null while one runs: its span stops there); a row whose key is absent
--          here has no owner (null)
--
-- Raw sample files are never rewritten: a sample's owner is decided here, when the derived
-- partitions are built (sql/views/owned_samples.sql joins it back), and lives only in derived
-- data. The owner depends on nothing but the key's columns, so rows that share a key (exact
-- duplicates) share it.
-- A sample belongs to the job whose job_gpus interval [start_ts, end_ts) contains its ts on the
-- same GPU: same UUID where both know it, else the same node and GPU index (an allocation
-- naming its GPU by UUID alone holds only the samples naming that UUID); a whole-node
-- allocation (null index and UUID) covers every GPU of its node, one with a MIG instance only
-- that instance. When several jobs claim the same sample (a shared GPU), the job the row carries is
-- kept if it is one of them (a sharer's own row, as its source stamped it from its hpc_job or
-- pod label: the marts split the GPU's time among such rows); else the sample is every
-- claiming job's, the row standing once for each, so the marts split the GPU's time among
-- them as they split its allocated time (one job taking it all would be observed for more
-- than it held). No covering interval means no owner, whatever the row carries.
-- Allocations are first narrowed to the samples' time range, and indexed and whole-node ones
-- are joined separately, so both joins hash on their keys.
-- sql/views/owned_samples.sql applies this rule too (grouping only the claims of allocations
-- that can share a sample); Spark applies this file, and the parity test holds the two equal.

-- `samples` names unowned_samples once, inlined where read (NOT MATERIALIZED: the plan is that
-- of reading it three times): the engine binds the lake's sample files once, not thrice.
WITH samples AS NOT MATERIALIZED (
    SELECT * FROM unowned_samples
),
sample_range AS (
    SELECT
        min(ts) AS first_ts,
        max(ts) AS last_ts
    FROM samples
),
allocations AS (
    SELECT
        g.cluster,
        g.job_id,
        g.node,
        g.gpu_index,
        g.gpu_uuid,
        g.mig_instance,
        g.start_ts,
        g.end_ts
    FROM job_gpus AS g, sample_range AS r
    WHERE g.start_ts <= r.last_ts
        AND (g.end_ts IS NULL OR g.end_ts > r.first_ts)
        AND g.job_id IS NOT NULL  -- (another tool's row without its job names no owner)
),
claims AS (
    SELECT
        s.cluster,
        s.node,
        s.gpu_index,
        s.gpu_uuid,
        s.mig_instance,
        s.ts,
        s.job_id AS label,
        g.job_id,
        g.end_ts,
        coalesce(g.job_id = s.job_id, FALSE) AS carried
    FROM samples AS s
    JOIN allocations AS g
        ON g.cluster = s.cluster
        AND g.node = s.node
        AND g.gpu_index = s.gpu_index
    WHERE (g.gpu_uuid IS NULL OR s.gpu_uuid IS NULL OR g.gpu_uuid = s.gpu_uuid)
        AND (g.mig_instance IS NULL OR g.mig_instance = s.mig_instance)
        AND s.ts >= g.start_ts
        AND (g.end_ts IS NULL OR s.ts < g.end_ts)
    UNION ALL
    SELECT
        s.cluster,
        s.node,
        s.gpu_index,
        s.gpu_uuid,
        s.mig_instance,
        s.ts,
        s.job_id AS label,
        g.job_id,
        g.end_ts,
        coalesce(g.job_id = s.job_id, FALSE) AS carried
    FROM samples AS s
    JOIN allocations AS g
        ON g.cluster = s.cluster
        AND g.node = s.node
    WHERE g.gpu_index IS NULL
        -- a whole node (no UUID either), or one GPU named by its UUID alone: that UUID's samples
        AND (g.gpu_uuid IS NULL OR g.gpu_uuid = s.gpu_uuid)
        AND (g.mig_instance IS NULL OR g.mig_instance = s.mig_instance)
        AND s.ts >= g.start_ts
        AND (g.end_ts IS NULL OR s.ts < g.end_ts)
)
SELECT
    cluster,
    node,
    gpu_index,
    gpu_uuid,
    mig_instance,
    ts,
    label,
    job_id,
    CASE WHEN bool_or(end_ts IS NULL) THEN NULL ELSE max(end_ts) END AS owner_end
FROM (
    SELECT
        *,
        bool_or(carried) OVER (
            PARTITION BY cluster, node, gpu_index, gpu_uuid, mig_instance, ts, label
        ) AS carries_one
    FROM claims
) AS c
WHERE carried OR NOT carries_one
GROUP BY cluster, node, gpu_index, gpu_uuid, mig_instance, ts, label, job_id
