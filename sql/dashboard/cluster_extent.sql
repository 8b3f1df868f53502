-- cluster_extent: which clusters the lake holds, and the span and size of each (cheap).
--
-- Grain:   one row per cluster
-- Reads:   cluster_occupancy, job_usage, cluster_data_end
-- Params:  none
-- Returns: cluster, data_start, data_end, gpus_total (null for a cluster without samples),
--          data_until (where the data ends: cluster_data_end, else data_end)
--
-- Read from the occupancy mart (one row per bucket), not from the samples, so the dashboard's
-- frame is cheap on any lake (cluster_data_end reads the jobs' latest records besides). data_end is the start of the last bucket with data. A
-- cluster known from its scheduler records alone (no telemetry yet, or none collected) spans
-- its jobs' runs (job_usage), so its jobs, users and fairness are shown, not "no data", up to
-- the end of its data that its running jobs are counted to (cluster_data_end: the latest time
-- its records give; the latest start or end left out the day its running jobs held GPUs on).
-- data_until is where the data ends, which can be minutes into a day after the last bucket's
-- start (a last sample's span, an open allocation, run past midnight): usage_daily has that
-- day, so the date picker must reach it.

WITH occupancy AS (
    SELECT
        cluster,
        min(bucket) AS data_start,
        max(bucket) AS data_end,
        max(gpus_total) AS gpus_total
    FROM cluster_occupancy
    GROUP BY cluster
),
scheduled AS (
    -- (a time after tomorrow comes from a wrong clock: left out, as sql/views/data_extent.sql)
    SELECT
        cluster,
        min(start_ts) FILTER (WHERE start_ts < date_trunc('day', now()) + INTERVAL 2 DAY)
            AS data_start
    FROM job_usage
    WHERE start_ts IS NOT NULL
    GROUP BY cluster
)
SELECT
    coalesce(o.cluster, s.cluster) AS cluster,
    coalesce(o.data_start, s.data_start) AS data_start,
    coalesce(o.data_end, to_timestamp(e.end_e)) AS data_end,
    o.gpus_total,
    greatest(o.data_end, to_timestamp(e.end_e)) AS data_until  -- (greatest skips a null)
FROM occupancy AS o
FULL OUTER JOIN scheduled AS s
    ON s.cluster = o.cluster
LEFT JOIN cluster_data_end AS e
    ON e.cluster = coalesce(o.cluster, s.cluster)
-- (a cluster whose every record is dated after tomorrow has no span the data reached: listed,
-- it was the default cluster and every page stopped on its missing start, for every user)
WHERE coalesce(o.data_start, s.data_start) IS NOT NULL
    AND coalesce(o.data_end, to_timestamp(e.end_e)) IS NOT NULL
ORDER BY cluster
