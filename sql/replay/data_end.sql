-- data_end: the end of one cluster's data (the replay's horizon and its "now").
--
-- Grain:   one row
-- Reads:   data_extent (the latest sample interval end, scheduler time, collection time or GPU
--          event of the cluster: the "now" of every rule)
-- Params:
--   $cluster  the cluster
-- Returns: end_e (epoch seconds; null for a cluster the lake holds nothing of)
--
-- Not the jobs' own times alone: a job still running when its last record was collected runs
-- to the end of the data, not to the last submit or start the records show.

SELECT max(epoch(data_end)) AS end_e
FROM data_extent
WHERE cluster = $cluster
