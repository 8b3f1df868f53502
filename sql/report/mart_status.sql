-- mart_status: whether the marts the report reads were built from the jobs in the lake.
--
-- Grain:   one row
-- Reads:   jobs, fairness_weekly
-- Params:  none
-- Returns: jobs_rows, fairness_rows

SELECT
    (SELECT count(*) FROM jobs) AS jobs_rows,
    (SELECT count(*) FROM fairness_weekly) AS fairness_rows
