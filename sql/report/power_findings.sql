-- power_findings: what the detectors found about power in a week — power-cap candidates and
-- other power findings, and power-cap recommendations — with the GPU-hours at stake and the
-- energy a cap would save.
--
-- Grain:   one row per (source, name): a finding detector or a recommendation kind whose name
--          mentions power or energy
-- Reads:   findings, recommendations
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: source, name, entries, gpu_h_at_stake, kwh_saved, example
--
-- A finding counts for the week when its span [start_ts, end_ts) overlaps it (detected_ts
-- where the span is unknown); a recommendation when it was created in the week. kWh saved is
-- the `kwh_saved` number of the evidence JSON (read with a regular expression, so a malformed
-- evidence string gives null rather than an error).

WITH power_findings AS (
    SELECT
        'finding' AS source,
        detector AS name,
        finding_id AS item,
        coalesce(gpu_h_at_stake, 0) AS gpu_h,
        TRY_CAST(
            regexp_extract(evidence, '"kwh_saved"\s*:\s*([-0-9.eE+]+)', 1) AS DOUBLE
        ) AS kwh_saved,
        message AS example
    FROM findings
    WHERE cluster = $cluster
        AND (lower(detector) LIKE '%power%' OR lower(detector) LIKE '%energy%')
        AND epoch(coalesce(start_ts, detected_ts)) < $week_end_e
        AND epoch(coalesce(end_ts, detected_ts)) >= $week_start_e
),
power_recs AS (
    SELECT
        'recommendation' AS source,
        kind AS name,
        rec_id AS item,
        coalesce(expected_gain_gpu_h, 0) AS gpu_h,
        TRY_CAST(
            regexp_extract(evidence, '"kwh_saved"\s*:\s*([-0-9.eE+]+)', 1) AS DOUBLE
        ) AS kwh_saved,
        coalesce(scope, '') || CASE WHEN config IS NULL THEN '' ELSE ': ' || config END
            AS example
    FROM recommendations
    WHERE cluster = $cluster
        AND (lower(kind) LIKE '%power%' OR lower(kind) LIKE '%energy%')
        AND epoch(created_ts) >= $week_start_e
        AND epoch(created_ts) < $week_end_e
),
found AS (
    SELECT source, name, item, gpu_h, kwh_saved, example FROM power_findings
    UNION ALL
    SELECT source, name, item, gpu_h, kwh_saved, example FROM power_recs
)
SELECT
    source,
    name,
    count(DISTINCT item) AS entries,
    sum(gpu_h) AS gpu_h_at_stake,
    sum(kwh_saved) AS kwh_saved,
    arg_max(example, coalesce(kwh_saved, gpu_h)) AS example
FROM found
GROUP BY source, name
ORDER BY kwh_saved DESC NULLS LAST, gpu_h_at_stake DESC, source, name
