-- occupancy_series: GPUs by state over time, for the stacked-area chart of the overview.
--
-- Grain:   one row per (cluster, bucket)
-- Reads:   cluster_occupancy
-- Params:
--   $cluster  the cluster to show
--   $start    inclusive lower bound on bucket (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      exclusive upper bound on bucket
-- Returns: bucket, active, idle_allocated, unallocated, unobserved
--
-- "active" and "idle_allocated" split the allocated GPUs; allocated GPUs whose activity is
-- unknown (no utilisation field at all) are shown as active.

SELECT
    bucket,
    gpus_allocated - gpus_idle_allocated AS active,
    gpus_idle_allocated AS idle_allocated,
    gpus_unallocated AS unallocated,
    greatest(gpus_unobserved, 0) AS unobserved
FROM cluster_occupancy
WHERE cluster = $cluster
    AND bucket >= $start
    AND bucket < $end
ORDER BY bucket
