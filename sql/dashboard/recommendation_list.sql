-- recommendation_list: the current recommendations of a cluster, most pressing first.
--
-- Grain:   one row per (cluster, rec_id), its latest version
-- Reads:   recommendations_latest
-- Params:
--   $cluster  the cluster
--   $needle   lower-case text that kind, scope, target, risk or config must contain ('' = any)
-- Returns: rec_id, kind, scope, target, expected_gain_gpu_h, gain_kind, risk, evidence, config,
--          created_ts
--
-- gain_kind and the order are recommendations_latest's (sql/views/recommendations_latest.sql),
-- as in the weekly report: nodes to drain, then GPU-hours saved, then gains that are not
-- savings (backfill, shifted), then no gain.

SELECT
    rec_id,
    kind,
    scope,
    target,
    expected_gain_gpu_h,
    gain_kind,
    risk,
    evidence,
    config,
    created_ts
FROM recommendations_latest
WHERE cluster = $cluster
    AND (
        $needle = ''
        OR contains(lower(kind), $needle)
        OR contains(lower(coalesce(scope, '')), $needle)
        OR contains(lower(coalesce(target, '')), $needle)
        OR contains(lower(coalesce(risk, '')), $needle)
        OR contains(lower(coalesce(config, '')), $needle)
    )
ORDER BY
    gain_rank,
    expected_gain_gpu_h DESC NULLS LAST,
    rec_id
