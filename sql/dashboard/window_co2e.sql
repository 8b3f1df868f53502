-- window_co2e: the kg CO2e of a cluster's jobs on the UTC days a window touches (usage_daily).
--
-- Grain:   one row
-- Reads:   usage_daily
-- Params:
--   $cluster  the cluster
--   $start    the window's start (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      the window's end, excluded
-- Returns: first_date, last_date, kg_co2e, energy_kwh
--
-- Whole UTC days, from the day of $start to the day of the last instant before $end: emissions
-- are kept per day, not per bucket. kg_co2e is null when no day's emissions are known (no
-- carbon intensity configured), never 0; energy_kwh is the jobs' energy on those days.

WITH bounds AS (
    SELECT
        DATE '1970-01-01' + CAST(floor(epoch($start) / 86400) AS INTEGER) AS first_date,
        DATE '1970-01-01' + CAST(floor((epoch($end) - 0.001) / 86400) AS INTEGER) AS last_date
)
SELECT
    b.first_date,
    b.last_date,
    sum(u.kg_co2e) AS kg_co2e,
    sum(u.energy_kwh) AS energy_kwh
FROM bounds AS b
LEFT JOIN usage_daily AS u
    ON u.cluster = $cluster
    AND u.date >= b.first_date
    AND u.date <= b.last_date
GROUP BY b.first_date, b.last_date
