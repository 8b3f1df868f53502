-- recommendation_list: the current recommendations of a cluster, most pressing first.
--
-- Grain:   one row per (cluster, rec_id), its latest version
-- Reads:   recommendations
-- Params:
--   $cluster  the cluster
--   $needle   lower-case text that kind, scope, target, risk or config must contain ('' = any)
-- Returns: rec_id, kind, scope, target, expected_gain_gpu_h, gain_kind, risk, evidence, config,
--          created_ts
--
-- gain_kind and the order as in sql/report/recommendations_weekly.sql: nodes to drain, then
-- GPU-hours saved, then gains that are not savings (backfill, shifted), then no gain.

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
        CASE
            WHEN expected_gain_gpu_h IS NOT NULL
                THEN coalesce(
                    nullif(regexp_extract(evidence, '"gain_kind"\s*:\s*"([^"]+)"', 1), ''),
                    CASE kind
                        WHEN 'idle_cancel_policy' THEN 'saved'
                        WHEN 'mig_packing' THEN 'saved'
                        WHEN 'drain_node' THEN 'failures_avoided'
                        WHEN 'gpu_cap' THEN 'shifted'
                        WHEN 'time_limit' THEN 'backfill'
                    END
                )
        END AS gain_kind,
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
    gain_kind,
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
ORDER BY
    CASE
        WHEN kind = 'drain_node' THEN 0
        WHEN gain_kind IN ('saved', 'failures_avoided') THEN 1
        WHEN expected_gain_gpu_h IS NOT NULL THEN 2
        ELSE 3
    END,
    expected_gain_gpu_h DESC NULLS LAST,
    rec_id
