-- data_weeks: the ISO weeks each cluster has data for, and where its data end — to choose the
-- report's default week and to name the weeks with data when a week without any is asked for.
--
-- Grain:   one row per (cluster, week)
-- Reads:   fairness_weekly, jobs_latest, gpu_job_buckets
-- Params:  none
-- Returns: cluster, week (its Monday, DATE), data_end_e (epoch seconds: the later of the end of
--          the cluster's last sample interval and its latest job submit, start or end)
--
-- A week has data where fairness_weekly has rows for it (jobs held GPUs, started or ended
-- short of their limit): the weeks the report's trends count. Jobs merely submitted or queued
-- in a week (e.g. before the first telemetry) do not make it a week with data.

WITH weeks AS (
    SELECT DISTINCT
        cluster,
        week
    FROM fairness_weekly
),
ends AS (
    SELECT
        cluster,
        max(epoch(greatest(submit_ts, start_ts, end_ts))) AS end_e
    FROM jobs_latest
    GROUP BY cluster
    UNION ALL
    SELECT
        cluster,
        max(interval_end_e) AS end_e
    FROM gpu_job_buckets
    GROUP BY cluster
),
data_end AS (
    SELECT
        cluster,
        max(end_e) AS data_end_e
    FROM ends
    GROUP BY cluster
)
SELECT
    w.cluster,
    w.week,
    d.data_end_e
FROM weeks AS w
LEFT JOIN data_end AS d
    ON d.cluster = w.cluster
ORDER BY w.cluster, w.week
