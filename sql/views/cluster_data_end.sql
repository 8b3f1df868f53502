-- cluster_data_end: per cluster, the end of the data that an allocation still open runs to.
--
-- Grain:   one row per cluster that has sample buckets or job records
-- Reads:   gpu_job_buckets, jobs_latest
-- Params:  none
-- Returns: cluster, end_e (epoch seconds)
--
-- The end of the cluster's last sample interval, kept per bucket so no sample is re-read. A
-- cluster without samples (its scheduler's records alone: Slurm or Kubernetes collected, no
-- GPU telemetry yet) ends at the latest time its records give: a submit, start or end, or when
-- a version was collected. Before, such a cluster had no end of data, and a job running there
-- held its GPUs for 0 hours. As in data_extent, a record's time after tomorrow (UTC, by this
-- machine's clock) is no time the data can have reached and is left out.

WITH horizon AS (
    SELECT date_trunc('day', now()) + INTERVAL 2 DAY AS ts
),
samples AS (
    SELECT
        cluster,
        max(interval_end_e) AS end_e
    FROM gpu_job_buckets
    GROUP BY cluster
),
records AS (
    SELECT
        j.cluster,
        max(epoch(greatest(
            CASE WHEN j.submit_ts < h.ts THEN j.submit_ts END,
            CASE WHEN j.start_ts < h.ts THEN j.start_ts END,
            CASE WHEN j.end_ts < h.ts THEN j.end_ts END,
            CASE WHEN j.updated_ts < h.ts THEN j.updated_ts END
        ))) AS end_e
    FROM jobs_latest AS j
    CROSS JOIN horizon AS h
    GROUP BY j.cluster
)
SELECT
    coalesce(s.cluster, r.cluster) AS cluster,
    coalesce(s.end_e, r.end_e) AS end_e
FROM samples AS s
FULL OUTER JOIN records AS r
    ON r.cluster = s.cluster
