-- occupancy_now: each cluster's GPUs by state over its last complete bucket (`gpuledger serve`).
--
-- Grain:   one row per cluster with a cluster_occupancy row
-- Reads:   cluster_occupancy, cluster_data_end
-- Params:
--   $bucket_s  the bucket width the marts were built with, in seconds
-- Returns: cluster, bucket, gpus_total, gpus_active, gpus_idle_allocated, gpus_unallocated,
--          gpus_unobserved, gpus_allocated
--
-- "Now" is the last bucket that ends at or before the end of the cluster's data (a bucket cut
-- short by the end of the data averages over seconds, not minutes), or the last bucket where
-- the data is shorter than one. The end is the telemetry's (cluster_data_end, where the
-- occupancy's buckets end), not the latest scheduler record's: a poll after the last sample
-- made the bucket the samples cut short "whole" (15 of 32 GPUs "unobserved"). GPUs averaged over the bucket (cluster_occupancy), so
-- allocated + unallocated + unobserved = total.

WITH complete AS (
    SELECT
        o.cluster,
        o.bucket,
        o.gpus_total,
        o.gpus_allocated,
        o.gpus_active,
        o.gpus_idle_allocated,
        o.gpus_unallocated,
        o.gpus_unobserved,
        epoch(o.bucket) + $bucket_s <= e.end_e AS whole
    FROM cluster_occupancy AS o
    JOIN cluster_data_end AS e
        ON e.cluster = o.cluster
)
SELECT
    cluster,
    bucket,
    gpus_total,
    gpus_active,
    gpus_idle_allocated,
    gpus_unallocated,
    gpus_unobserved,
    gpus_allocated
FROM complete
QUALIFY row_number() OVER (PARTITION BY cluster ORDER BY whole DESC, bucket DESC) = 1
ORDER BY cluster
