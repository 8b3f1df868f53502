-- co2e_fallback: the jobs of a week whose kg CO2e counted some hours at a fallback intensity
-- (hours their cluster's hourly CSV lacks), for the report's note on emissions.
--
-- Grain:   one row
-- Reads:   job_usage
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: jobs, fallback_hours
--
-- A job counts for the week when it ran in it (started before its end, not ended before its
-- start); fallback_hours are all of its hours counted so (job_usage.co2e_fallback_hours).

SELECT
    count(*) AS jobs,
    coalesce(sum(co2e_fallback_hours), 0) AS fallback_hours
FROM job_usage
WHERE cluster = $cluster
    AND co2e_fallback_hours > 0
    AND epoch(start_ts) < $week_end_e
    AND (end_ts IS NULL OR epoch(end_ts) >= $week_start_e)
