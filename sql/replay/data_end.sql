-- data_end: the end of one cluster's data (the replay's horizon and its "now").
--
-- Grain:   one row
-- Reads:   jobs_latest
-- Params:
--   $cluster  the cluster
-- Returns: end_e (epoch seconds; null for a cluster with no jobs)

SELECT
    max(greatest(
        coalesce(epoch(end_ts), 0),
        coalesce(epoch(start_ts), 0),
        coalesce(epoch(submit_ts), 0)
    )) AS end_e
FROM jobs_latest
WHERE cluster = $cluster
