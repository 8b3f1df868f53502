-- cluster_extent: which clusters the lake holds, and the span and size of each (cheap).
--
-- Grain:   one row per cluster
-- Reads:   cluster_occupancy
-- Params:  none
-- Returns: cluster, data_start, data_end, gpus_total
--
-- Read from the occupancy mart (one row per bucket), not from the samples, so the dashboard's
-- frame costs milliseconds on any lake. data_end is the start of the last bucket with data.

SELECT
    cluster,
    min(bucket) AS data_start,
    max(bucket) AS data_end,
    max(gpus_total) AS gpus_total
FROM cluster_occupancy
GROUP BY cluster
ORDER BY cluster
