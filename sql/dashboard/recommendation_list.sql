-- recommendation_list: the current recommendations of a cluster, largest expected gain first.
--
-- Grain:   one row per (cluster, rec_id), its latest version
-- Reads:   recommendations
-- Params:
--   $cluster  the cluster
--   $needle   lower-case text that kind, scope, target, risk or config must contain ('' = any)
-- Returns: rec_id, kind, scope, target, expected_gain_gpu_h, risk, evidence, config, created_ts

WITH latest AS (
    SELECT
        rec_id,
        kind,
        scope,
        target,
        expected_gain_gpu_h,
        risk,
        evidence,
        config,
        created_ts,
        row_number() OVER (PARTITION BY rec_id ORDER BY created_ts DESC) AS version_rank
    FROM recommendations
    WHERE cluster = $cluster
)
SELECT
    rec_id,
    kind,
    scope,
    target,
    expected_gain_gpu_h,
    risk,
    evidence,
    config,
    created_ts
FROM latest
WHERE version_rank = 1
    AND (
        $needle = ''
        OR contains(lower(kind), $needle)
        OR contains(lower(coalesce(scope, '')), $needle)
        OR contains(lower(coalesce(target, '')), $needle)
        OR contains(lower(coalesce(risk, '')), $needle)
        OR contains(lower(coalesce(config, '')), $needle)
    )
ORDER BY expected_gain_gpu_h DESC NULLS LAST, rec_id
