-- open_starts: per cluster, the earliest start of an allocation still open (no end yet).
--
-- Grain:   one row per cluster with an open allocation
-- Reads:   job_gpus, jobs_latest
-- Params:  none
-- Returns: cluster, start_e (epoch seconds)
--
-- An open allocation runs to the end of its cluster's data (cluster_data_end: its last sample's,
-- else its scheduler records' latest time): where the cluster had no end of data before or has
-- none now, the allocated time of every day from this start on can change (summary update,
-- warehouse/summary/update.py); where the end moved, the days in between are updated.
-- A running job with GPUs and no job_gpus row with a start holds them to the end of the data
-- too (job_gpu_intervals), else to its last update.

SELECT
    cluster,
    min(start_e) AS start_e
FROM (
    SELECT
        cluster,
        epoch(start_ts) AS start_e
    FROM job_gpus
    -- (an end after tomorrow is the job's, open while it runs: job_gpu_intervals)
    WHERE end_ts IS NULL OR end_ts >= date_trunc('day', now()) + INTERVAL 2 DAY
    UNION ALL
    SELECT
        j.cluster,
        epoch(j.start_ts) AS start_e
    FROM jobs_latest AS j
    WHERE j.start_ts IS NOT NULL
        AND j.end_ts IS NULL
        AND j.gpus > 0
        AND NOT EXISTS (
            SELECT 1
            FROM job_gpus AS g
            WHERE g.cluster = j.cluster AND g.job_id = j.job_id AND g.start_ts IS NOT NULL
        )
) AS open_allocations
GROUP BY cluster
