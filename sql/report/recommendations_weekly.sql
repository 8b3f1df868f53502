-- recommendations_weekly: the policy recommendations the detectors made in a week, largest
-- expected gain first, with their evidence and the exact configuration to apply.
--
-- Grain:   one row per recommendation (latest version of each rec_id)
-- Reads:   recommendations
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: rec_id, kind, scope, target, expected_gain_gpu_h, risk, evidence, config, created_ts

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
FROM recommendations
WHERE cluster = $cluster
    AND epoch(created_ts) >= $week_start_e
    AND epoch(created_ts) < $week_end_e
QUALIFY row_number() OVER (PARTITION BY rec_id ORDER BY created_ts DESC) = 1
ORDER BY expected_gain_gpu_h DESC NULLS LAST, rec_id
