-- open_starts: per cluster, the earliest start of an allocation still open (no end yet).
--
-- Grain:   one row per cluster with an open allocation
-- Reads:   job_gpus
-- Params:  none
-- Returns: cluster, start_e (epoch seconds)
--
-- An open allocation runs to the end of its cluster's data, and holds nothing while the cluster
-- has no data: where a cluster's first samples land, or its last are removed, the allocated
-- time of every day from this start on can change (summary update, warehouse/summary/update.py).

SELECT
    cluster,
    min(epoch(start_ts)) AS start_e
FROM job_gpus
WHERE end_ts IS NULL
GROUP BY cluster
