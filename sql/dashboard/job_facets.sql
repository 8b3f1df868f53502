-- job_facets: the values the Jobs page's filters offer (users, accounts, partitions, states).
--
-- Grain:   one row per (facet, value)
-- Reads:   job_usage
-- Params:
--   $cluster  the cluster
--   $start    only jobs running after this, or starting at or after it (one that ran before and ended at it ran none of the window) (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      only jobs started before this
--   $viewer   only this user's jobs, or NULL for everyone's
--             (a user name matches in any case)
-- Returns: facet, value, jobs

WITH scoped AS (
    SELECT
        user,
        account,
        partition,
        split_part(state, ' ', 1) AS state
    FROM job_usage
    WHERE cluster = $cluster
        AND (end_ts IS NULL OR end_ts > $start OR start_ts >= $start)
        AND start_ts < $end
        AND ($viewer IS NULL OR lower(user) = lower($viewer))
),
facets AS (
    SELECT 'user' AS facet, user AS value FROM scoped
    UNION ALL
    SELECT 'account' AS facet, account AS value FROM scoped
    UNION ALL
    SELECT 'partition' AS facet, partition AS value FROM scoped
    UNION ALL
    SELECT 'state' AS facet, state AS value FROM scoped
)
SELECT
    facet,
    value,
    count(*) AS jobs
FROM facets
WHERE value IS NOT NULL
GROUP BY facet, value
ORDER BY facet, value
