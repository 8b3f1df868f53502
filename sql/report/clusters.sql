-- clusters: the clusters the lake knows jobs or fairness rows for.
--
-- Grain:   one row per cluster
-- Reads:   jobs, fairness_weekly
-- Params:  none
-- Returns: cluster

SELECT DISTINCT cluster FROM jobs
UNION
SELECT DISTINCT cluster FROM fairness_weekly
ORDER BY cluster
