-- data_extent: per cluster, when the lake's data begins and ends: the "now" of every rule.
--
-- Grain:   one row per cluster that has jobs, sample buckets or GPU events
-- Reads:   gpu_job_buckets, jobs, gpu_events
-- Params:  none
-- Returns: cluster, data_start, data_end
--
-- A lake is judged as of the end of its own data, never as of the wall clock, so the same lake
-- gives the same figures today and in a year: a job still running is counted up to data_end.
-- data_end is the latest of the end of the last sample interval (as job_usage counts it), any
-- job time the scheduler reported (submit, start, end, and when that version was collected)
-- and any GPU event; data_start is the earliest of the first sample, job start and event.
-- Reads the sample buckets (a mart), not the samples: cheap on any lake.
--
-- A time after tomorrow (UTC, by this machine's clock) is no time the data can have reached: a
-- clock that is wrong wrote it (a collector's host, slurmdbd's, another tool's). Taken as data,
-- one scheduler record stamped in 2030 made that the "now" of every rule (a stranded GPU's
-- 30 GPU-hours became 5,434). Such times are left out here, as the per-day pass leaves out the
-- days of samples dated after tomorrow (warehouse/partitions.py); the record stays in the lake,
-- and an end it gives is none (sql/views/jobs_latest.sql says where the job ended instead).

WITH horizon AS (
    SELECT date_trunc('day', now()) + INTERVAL 2 DAY AS ts
),
samples AS (
    SELECT
        cluster,
        min(first_e) AS start_e,
        max(interval_end_e) AS end_e
    FROM gpu_job_buckets
    GROUP BY cluster
),
job_times AS (
    SELECT
        j.cluster,
        min(epoch(j.start_ts)) FILTER (WHERE j.start_ts < h.ts) AS start_e,
        max(epoch(greatest(
            CASE WHEN j.submit_ts < h.ts THEN j.submit_ts END,
            CASE WHEN j.start_ts < h.ts THEN j.start_ts END,
            CASE WHEN j.end_ts < h.ts THEN j.end_ts END,
            CASE WHEN j.updated_ts < h.ts THEN j.updated_ts END
        ))) AS end_e
    FROM jobs AS j
    CROSS JOIN horizon AS h
    GROUP BY j.cluster
),
events AS (
    SELECT
        e.cluster,
        min(epoch(e.ts)) AS start_e,
        max(epoch(e.ts)) AS end_e
    FROM gpu_events AS e
    CROSS JOIN horizon AS h
    WHERE e.ts < h.ts
    GROUP BY e.cluster
),
clusters AS (
    SELECT cluster FROM samples
    UNION
    SELECT cluster FROM job_times
    UNION
    SELECT cluster FROM events
)
SELECT
    c.cluster,
    to_timestamp(least(s.start_e, j.start_e, e.start_e)) AS data_start,
    to_timestamp(greatest(s.end_e, j.end_e, e.end_e)) AS data_end
FROM clusters AS c
LEFT JOIN samples AS s ON s.cluster = c.cluster
LEFT JOIN job_times AS j ON j.cluster = c.cluster
LEFT JOIN events AS e ON e.cluster = c.cluster
