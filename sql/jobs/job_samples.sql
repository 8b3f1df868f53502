-- job_samples: the GPU samples that can belong to one job: on its allocations' nodes, in its span.
--
-- Grain:   one row per gpu_samples row on one of $nodes from $first_ts to $last_ts
-- Reads:   gpu_samples
-- Params:
--   $nodes     the nodes of the job's allocations (VARCHAR[]; sql/jobs/job_span.sql's nodes)
--   $first_ts  the earliest start of its records and allocations (NULL: no lower bound)
--   $last_ts   the latest end (NULL: no upper bound, the job still runs)
-- Returns: every gpu_samples column, as unowned_samples (sql/views/unowned_samples.sql)
--
-- `gpuledger job` reads this as unowned_samples: a sample's owner is decided among the
-- allocations on its own node that cover its instant (sql/views/owned_samples.sql), so the
-- samples of other nodes and other times cannot be the job's and do not change the owners of
-- these. The node range is the list's bounds, so that the Parquet reader skips the row groups
-- (the files are sorted by node) whose statistics lie outside it.

SELECT *
FROM gpu_samples
WHERE node >= list_min(CAST($nodes AS VARCHAR[]))
    AND node <= list_max(CAST($nodes AS VARCHAR[]))
    AND list_contains(CAST($nodes AS VARCHAR[]), node)
    AND ($first_ts IS NULL OR ts >= $first_ts)
    AND ($last_ts IS NULL OR ts <= $last_ts)
