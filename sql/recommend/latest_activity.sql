-- latest_activity: the last instant the lake saw a job start or end, up to $now.
--
-- Grain:   one row
-- Reads:   jobs_latest
-- Params:
--   $now  the run's time (TIMESTAMP, UTC); later instants are ignored
-- Returns: latest_ts (null when no job started before $now)
--
-- The replay window ends here rather than at $now, so a lake of last month's data is
-- judged as of its own end, not found empty.

SELECT
    max(least(coalesce(end_ts, start_ts), $now)) AS latest_ts
FROM jobs_latest
WHERE start_ts < $now
