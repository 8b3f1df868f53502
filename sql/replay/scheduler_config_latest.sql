-- scheduler_config_latest: the newest snapshot of one cluster's scheduler configuration
-- (`gpuledger collect slurm-config`).
--
-- Grain:   one row per (kind, name, key) of the latest snapshot of $cluster
-- Reads:   scheduler_config
-- Params:
--   $cluster  the cluster
-- Returns: kind, name, key, value, updated_ts

SELECT
    kind,
    name,
    key,
    value,
    updated_ts
FROM scheduler_config
WHERE cluster = $cluster
QUALIFY updated_ts = max(updated_ts) OVER ()
ORDER BY kind, name, key
