-- fairness_shares: each account's (and user's) usage against its entitlement, per week.
--
-- Grain:   one row per (week, account, user); user is null on an account's own row
-- Reads:   fairness_weekly
-- Params:
--   $cluster  the cluster
--   $start    weeks starting on or after this date's week (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      weeks starting before this
--   $viewer   only this user's rows and their accounts' own rows, or NULL for every row
--             (a user name matches in any case)
-- Returns: week, account, user, alloc_gpu_h, usage_share, entitled_share, usage_ratio,
--          wait_p50_h, wait_p95_h, waste_gpu_h
--
-- Columns as the report's mart defines them (sql/marts/fairness_weekly.sql): account rows have
-- a null user; waits there are in seconds, shown here in hours.

SELECT
    week,
    account,
    user,
    alloc_gpu_h,
    usage_share,
    entitled_share,
    usage_ratio,
    wait_p50_s / 3600.0 AS wait_p50_h,
    wait_p95_s / 3600.0 AS wait_p95_h,
    waste_gpu_h
FROM fairness_weekly
WHERE cluster = $cluster
    AND week >= date_trunc('week', CAST($start AS DATE))
    AND week < $end
    AND (
        $viewer IS NULL
        OR lower(user) = lower($viewer)
        -- the totals of the viewer's own accounts only: another account of one user is that
        -- user's usage and waste (every account's row was shown to every user)
        OR (
            user IS NULL
            AND account IN (
                SELECT account
                FROM fairness_weekly
                WHERE cluster = $cluster AND lower(user) = lower($viewer)
            )
        )
    )
ORDER BY week, account, user NULLS FIRST
