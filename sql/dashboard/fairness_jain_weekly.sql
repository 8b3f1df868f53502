-- fairness_jain_weekly: Jain's fairness index over accounts, per week.
--
-- Grain:   one row per week
-- Reads:   fairness_weekly, associations (the latest snapshot of the cluster's tree)
-- Params:
--   $cluster  the cluster
--   $start    weeks starting on or after this date's week (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      weeks starting before this
-- Returns: week, accounts, jain_index, max_min_ratio
--
-- x = usage_share / entitled_share per top-level account with an entitlement (an account whose
-- parent is the tree's root): a sub-account's use and entitlement are inside its parent's (an
-- account row's shares are of its subtree), so counting both would weigh them twice.
-- J = (Σx)² / (n · Σx²): 1 when every account got its entitlement in proportion, 1/n when one
-- account got everything.

WITH tree AS (
    SELECT
        account,
        user,
        parent
    FROM associations
    WHERE cluster = $cluster
    QUALIFY updated_ts = max(updated_ts) OVER ()
),
-- accounts under another account than the root
nested AS (
    SELECT a.account
    FROM tree AS a
    JOIN tree AS p
        ON p.account = a.parent AND p.user IS NULL
    WHERE a.user IS NULL
        AND p.account <> 'root'
),
ratios AS (
    SELECT
        week,
        usage_share / entitled_share AS x
    FROM fairness_weekly
    WHERE cluster = $cluster
        AND user IS NULL
        AND entitled_share > 0
        AND week >= date_trunc('week', CAST($start AS DATE))
        AND week < $end
        AND account NOT IN (SELECT account FROM nested)
)
SELECT
    week,
    count(*) AS accounts,
    sum(x) * sum(x) / nullif(count(*) * sum(x * x), 0) AS jain_index,
    max(x) / nullif(min(x), 0) AS max_min_ratio
FROM ratios
GROUP BY week
ORDER BY week
