-- fairness_jain_weekly: Jain's fairness index over accounts, per week.
--
-- Grain:   one row per week
-- Reads:   fairness_weekly
-- Params:
--   $cluster  the cluster
--   $start    weeks starting on or after this date's week (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      weeks starting before this
-- Returns: week, accounts, jain_index, max_min_ratio
--
-- x = usage_share / entitled_share per account (accounts with an entitlement);
-- J = (Σx)² / (n · Σx²): 1 when every account got its entitlement in proportion, 1/n when one
-- account got everything.

WITH ratios AS (
    SELECT
        week,
        usage_share / entitled_share AS x
    FROM fairness_weekly
    WHERE cluster = $cluster
        AND user IS NULL
        AND entitled_share > 0
        AND week >= date_trunc('week', CAST($start AS DATE))
        AND week < $end
)
SELECT
    week,
    count(*) AS accounts,
    sum(x) * sum(x) / nullif(count(*) * sum(x * x), 0) AS jain_index,
    max(x) / nullif(min(x), 0) AS max_min_ratio
FROM ratios
GROUP BY week
ORDER BY week
