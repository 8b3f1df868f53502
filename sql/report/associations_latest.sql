-- associations_latest: the share tree of one cluster as last collected — accounts with their
-- parent and users under their account, with raw shares (Slurm RawShares / FairShare). Each
-- collection lands the whole tree at one updated_ts; the latest snapshot is the tree.
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
QUALIFY updated_ts = max(updated_ts) OVER ()
ORDER BY account, user
