-- owner_changes: the samples of one file whose owner by the allocation rule of DESIGN §4
-- differs from the job_id they carry.
--
-- Grain:   one row per changed row of partition_samples
-- Reads:   partition_samples (one Parquet file of gpu_samples, with file_row_number), job_gpus
-- Params:  none
-- Returns: file_row_number, job_id (the owner; null = no job)
--
-- A sample belongs to the job whose job_gpus interval [start_ts, end_ts) contains its ts on the
-- same GPU: same UUID where both know it, else the same node and GPU index; a whole-node
-- allocation (null index) covers every GPU of its node, one with a MIG instance only that
-- instance. When several jobs claim the same sample (a shared GPU), the job the row already
-- carries is kept if it is one of them (a sharer's own row, as its source stamped it from its
-- hpc_job or pod label: the marts split the GPU's time among such rows), else the smallest
-- job_id, so the result is deterministic. No covering interval means no owner (null).
-- Allocations are first narrowed to the file's time range, and indexed and whole-node ones are
-- joined separately, so both joins hash on their keys.

WITH file_range AS (
    SELECT
        min(ts) AS first_ts,
        max(ts) AS last_ts
    FROM partition_samples
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
    FROM job_gpus AS g, file_range AS r
    WHERE g.start_ts <= r.last_ts
        AND (g.end_ts IS NULL OR g.end_ts > r.first_ts)
),
claims AS (
    SELECT
        s.file_row_number,
        g.job_id,
        g.job_id = s.job_id AS carried
    FROM partition_samples AS s
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
        s.file_row_number,
        g.job_id,
        g.job_id = s.job_id AS carried
    FROM partition_samples AS s
    JOIN allocations AS g
        ON g.cluster = s.cluster
        AND g.node = s.node
    WHERE g.gpu_index IS NULL
        AND (g.gpu_uuid IS NULL OR s.gpu_uuid IS NULL OR g.gpu_uuid = s.gpu_uuid)
        AND (g.mig_instance IS NULL OR g.mig_instance = s.mig_instance)
        AND s.ts >= g.start_ts
        AND (g.end_ts IS NULL OR s.ts < g.end_ts)
),
owners AS (
    SELECT
        file_row_number,
        coalesce(min(job_id) FILTER (WHERE carried), min(job_id)) AS job_id
    FROM claims
    GROUP BY file_row_number
)
SELECT
    s.file_row_number,
    o.job_id
FROM partition_samples AS s
LEFT JOIN owners AS o
    ON o.file_row_number = s.file_row_number
WHERE s.job_id IS DISTINCT FROM o.job_id
ORDER BY s.file_row_number
