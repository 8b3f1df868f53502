-- associations_latest: the share tree of one cluster as last collected — accounts with their
-- parent and users under their account, with raw shares (Slurm RawShares / FairShare).
--
-- Grain:   one row per (account, user); account rows have a null user
-- Reads:   associations
-- Params:
--   $cluster  cluster name
-- Returns: account, user, parent, raw_shares, source, updated_ts

SELECT
    account,
    user,
    parent,
    raw_shares,
    source,
    updated_ts
FROM associations
WHERE cluster = $cluster
QUALIFY row_number() OVER (
    PARTITION BY account, coalesce(user, '')
    ORDER BY updated_ts DESC
) = 1
ORDER BY account, user
