-- latest_activity: per cluster, the last instant the lake saw a job start or end, up to $now.
--
-- Grain:   one row per cluster with a job started before $now
-- Reads:   jobs_latest
-- Params:
--   $now  the run's time (TIMESTAMP, UTC); later instants are ignored
-- Returns: cluster, latest_ts
--
-- Each cluster's replay window reaches back from here rather than from $now, so a cluster
-- whose data ended last month is judged as of its own end, not found empty: one window for
-- the whole lake, from its newest cluster's end, left an older cluster's month out of it.

SELECT
    cluster,
    max(least(coalesce(end_ts, start_ts), $now)) AS latest_ts
FROM jobs_latest
WHERE start_ts < $now
GROUP BY cluster
ORDER BY cluster
