-- owned_samples: the samples of one file with job_id set by the allocation rule of DESIGN §4.
--
-- Grain:   one row per row of partition_samples, in file order
-- Reads:   partition_samples (one Parquet file of gpu_samples), job_gpus
-- Params:  none
-- Returns: every column of partition_samples with job_id replaced, plus `changed` (bool)
--
-- A sample belongs to the job whose job_gpus interval [start_ts, end_ts) contains its ts on the
-- same GPU: same UUID where both know it, else the same node and GPU index; a whole-node
-- allocation (null index) covers every GPU of its node, one with a MIG instance only that
-- instance. When several jobs claim the same sample (a shared GPU), the smallest job_id is
-- kept, so the result is deterministic. No covering interval means no owner (null).

WITH owners AS (
    SELECT
        s.file_row_number,
        min(g.job_id) AS job_id
    FROM partition_samples AS s
    JOIN job_gpus AS g
        ON g.cluster = s.cluster
        AND g.node = s.node
        AND (g.gpu_index IS NULL OR g.gpu_index = s.gpu_index)
        AND (g.gpu_uuid IS NULL OR s.gpu_uuid IS NULL OR g.gpu_uuid = s.gpu_uuid)
        AND (g.mig_instance IS NULL OR g.mig_instance = s.mig_instance)
        AND s.ts >= g.start_ts
        AND (g.end_ts IS NULL OR s.ts < g.end_ts)
    GROUP BY s.file_row_number
)
SELECT
    s.* REPLACE (o.job_id AS job_id),
    s.job_id IS DISTINCT FROM o.job_id AS changed
FROM partition_samples AS s
LEFT JOIN owners AS o
    ON o.file_row_number = s.file_row_number
ORDER BY s.file_row_number
