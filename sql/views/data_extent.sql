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

WITH samples AS (
    SELECT
        cluster,
        min(first_e) AS start_e,
        max(interval_end_e) AS end_e
    FROM gpu_job_buckets
    GROUP BY cluster
),
job_times AS (
    SELECT
        cluster,
        min(epoch(start_ts)) AS start_e,
        max(epoch(greatest(submit_ts, start_ts, end_ts, updated_ts))) AS end_e
    FROM jobs
    GROUP BY cluster
),
events AS (
    SELECT
        cluster,
        min(epoch(ts)) AS start_e,
        max(epoch(ts)) AS end_e
    FROM gpu_events
    GROUP BY cluster
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
