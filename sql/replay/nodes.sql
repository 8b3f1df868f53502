-- nodes: the GPU nodes of one cluster: how many whole GPUs each has, of which model.
--
-- Grain:   one row per node of $cluster with GPUs
-- Reads:   gpus
-- Params:
--   $cluster  the cluster
-- Returns: node, gpus, model
--
-- MIG instances are not counted apart: a node's GPUs are its physical devices.

SELECT
    node,
    count(DISTINCT gpu_index)::INTEGER AS gpus,
    coalesce(max(model), '') AS model
FROM gpus
WHERE cluster = $cluster
    AND gpu_index IS NOT NULL
GROUP BY node
ORDER BY node
