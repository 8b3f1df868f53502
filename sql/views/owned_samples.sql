-- owned_samples: every GPU sample with its owner by the allocation rule of DESIGN §4.
--
-- Grain:   one row per row of unowned_samples, but a row that several jobs claim and that
--          carries none of them: one per claiming job
-- Reads:   unowned_samples (gpu_samples rows as their source wrote them), job_gpus
-- Params:  none
-- Returns: every gpu_samples column, job_id the owner (null: no allocation covers the sample),
--          owners (the jobs the rows of the sample's GPU and time go to: more than 1 on a GPU
--          that several jobs' allocations share, whose time is split among them), owner_end
--          (the end of the owner's allocation covering the sample, null while it runs: the
--          sample's span stops there, DESIGN §4)
--
-- The raw files keep the job_id their source wrote (an exporter's label, or none); readers
-- that need each sample's job read this (the per-day pass, the bottleneck signals), never the
-- raw job_id.
-- The rule is sql/attribution/sample_owners.sql's (which Spark applies: the parity test holds
-- both engines to the same owners); here it is applied without grouping every sample's claims.
-- An allocation that no other allocation can share a sample with (none on the same node, on
-- the same GPU index or a whole node, overlaps it in time) is the only claim on every sample
-- it covers: those samples take its job_id by one join. Only the samples the other, contested
-- allocations (shared GPUs, overlapping records) claim have their claims grouped as
-- sample_owners does, by the sample's key and the job_id the row carries.

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
-- numbered to tell two equal rows apart: both claim the same samples
allocations AS MATERIALIZED (
    SELECT
        g.cluster,
        g.job_id,
        g.node,
        g.gpu_index,
        g.gpu_uuid,
        g.mig_instance,
        g.start_ts,
        g.end_ts,
        row_number() OVER (
            ORDER BY
                g.cluster, g.node, g.gpu_index, g.gpu_uuid, g.mig_instance, g.job_id,
                g.start_ts, g.end_ts
        ) AS allocation_id
    FROM job_gpus AS g, sample_range AS r
    WHERE g.start_ts <= r.last_ts
        AND (g.end_ts IS NULL OR g.end_ts > r.first_ts)
        AND g.job_id IS NOT NULL  -- (another tool's row without its job names no owner)
),
contested AS (
    SELECT DISTINCT a.allocation_id
    FROM allocations AS a
    JOIN allocations AS b
        ON b.cluster = a.cluster
        AND b.node = a.node
    WHERE b.allocation_id <> a.allocation_id
        AND (a.gpu_index IS NULL OR b.gpu_index IS NULL OR a.gpu_index = b.gpu_index)
        AND (b.end_ts IS NULL OR a.start_ts < b.end_ts)
        AND (a.end_ts IS NULL OR b.start_ts < a.end_ts)
),
sole AS (
    SELECT a.*
    FROM allocations AS a
    ANTI JOIN contested AS c
        ON c.allocation_id = a.allocation_id
),
shared AS (
    SELECT a.*
    FROM allocations AS a
    SEMI JOIN contested AS c
        ON c.allocation_id = a.allocation_id
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
    JOIN shared AS g
        ON g.cluster = s.cluster
        AND g.node = s.node
        AND (g.gpu_index IS NULL OR g.gpu_index = s.gpu_index)
    -- an allocation naming its GPU by UUID alone holds the samples naming that UUID: a sample
    -- naming only its index cannot be told to be on it (it is no whole-node row)
    WHERE (
        g.gpu_uuid IS NULL
        OR g.gpu_uuid = s.gpu_uuid
        OR (s.gpu_uuid IS NULL AND g.gpu_index IS NOT NULL)
    )
        AND (g.mig_instance IS NULL OR g.mig_instance = s.mig_instance)
        AND s.ts >= g.start_ts
        AND (g.end_ts IS NULL OR s.ts < g.end_ts)
),
-- as sample_owners: the job the row carries if it is one of the claims, else every job that
-- claims it (the row then stands once for each: sql/views/sample_spans.sql splits the device's
-- time among the jobs at one ts, as job_gpu_intervals splits the allocated time)
shared_owners AS (
    SELECT
        *,
        -- the jobs the GPU's rows at this time go to, whatever job each row carries
        count(DISTINCT job_id) OVER (
            PARTITION BY cluster, node, gpu_index, gpu_uuid, mig_instance, ts
        ) AS owners
    FROM (
        SELECT
            cluster,
            node,
            gpu_index,
            gpu_uuid,
            mig_instance,
            ts,
            label,
            job_id,
            -- the latest end of the job's allocations covering the sample (none: running)
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
    ) AS o
)
SELECT
    s.* REPLACE (coalesce(i.job_id, n.job_id, o.job_id) AS job_id),
    coalesce(o.owners, 1) AS owners,
    CASE
        WHEN i.job_id IS NOT NULL THEN i.end_ts
        WHEN n.job_id IS NOT NULL THEN n.end_ts
        ELSE o.owner_end
    END AS owner_end
FROM samples AS s
LEFT JOIN (SELECT * FROM sole WHERE gpu_index IS NOT NULL) AS i
    ON i.cluster = s.cluster
    AND i.node = s.node
    AND i.gpu_index = s.gpu_index
    AND (i.gpu_uuid IS NULL OR s.gpu_uuid IS NULL OR i.gpu_uuid = s.gpu_uuid)
    AND (i.mig_instance IS NULL OR i.mig_instance = s.mig_instance)
    AND s.ts >= i.start_ts
    AND (i.end_ts IS NULL OR s.ts < i.end_ts)
LEFT JOIN (SELECT * FROM sole WHERE gpu_index IS NULL) AS n
    ON n.cluster = s.cluster
    AND n.node = s.node
    AND (n.gpu_uuid IS NULL OR n.gpu_uuid = s.gpu_uuid)  -- (by UUID alone: as in claims)
    AND (n.mig_instance IS NULL OR n.mig_instance = s.mig_instance)
    AND s.ts >= n.start_ts
    AND (n.end_ts IS NULL OR s.ts < n.end_ts)
LEFT JOIN shared_owners AS o
    ON o.cluster = s.cluster
    AND o.node = s.node
    AND o.ts = s.ts
    AND o.gpu_index IS NOT DISTINCT FROM s.gpu_index
    AND o.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid
    AND o.mig_instance IS NOT DISTINCT FROM s.mig_instance
    AND o.label IS NOT DISTINCT FROM s.job_id
