-- node_partitions: which partitions' jobs ran on which node (the partition layout as the
-- lake saw it, where no slurm.conf is given).
--
-- Grain:   one row per (node, partition) of $cluster
-- Reads:   jobs_latest
-- Params:
--   $cluster  the cluster
-- Returns: node, partition

SELECT DISTINCT
    unnest(nodes) AS node,
    partition
FROM jobs_latest
WHERE cluster = $cluster
    AND partition IS NOT NULL
    AND nodes IS NOT NULL
ORDER BY node, partition
