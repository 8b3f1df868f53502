-- recommendations_weekly: every policy recommendation stored for a cluster, most pressing first,
-- with what its gain counts, its evidence, the exact configuration to apply, the window its
-- evidence was replayed over, and whether that evidence covers the report's week.
--
-- Grain:   one row per recommendation (latest version of each rec_id)
-- Reads:   recommendations_latest
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: rec_id, kind, scope, target, expected_gain_gpu_h, gain_kind, risk, evidence, config,
--          created_ts, evidence_from, evidence_until, covers_week
--
-- `detect` stamps created_ts with the time it ran (for a backfilled lake, weeks after the data)
-- and records the span of the data it replayed (not its lookback window) in the evidence JSON
-- (`replayed_from`, `replayed_until`, ISO text; read with a regular expression, so malformed
-- evidence has no window). A recommendation covers the week when that window overlaps it; one
-- without a window, when it was made in the week.
--
-- gain_kind and the order (nodes to drain, then GPU-hours saved, then gains that are not
-- savings, then no gain; by gain within each) are recommendations_latest's
-- (sql/views/recommendations_latest.sql), as on the dashboard.

WITH latest AS (
    SELECT
        rec_id,
        kind,
        scope,
        target,
        expected_gain_gpu_h,
        gain_kind,
        gain_rank,
        risk,
        evidence,
        config,
        created_ts,
        try_cast(
            nullif(regexp_extract(evidence, '"replayed_from"\s*:\s*"([^"]+)"', 1), '')
            AS TIMESTAMPTZ
        ) AS evidence_from,
        try_cast(
            nullif(regexp_extract(evidence, '"replayed_until"\s*:\s*"([^"]+)"', 1), '')
            AS TIMESTAMPTZ
        ) AS evidence_until
    FROM recommendations_latest
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
    created_ts,
    evidence_from,
    evidence_until,
    CASE
        WHEN evidence_from IS NOT NULL AND evidence_until IS NOT NULL
            THEN epoch(evidence_from) < $week_end_e AND epoch(evidence_until) > $week_start_e
        ELSE epoch(created_ts) >= $week_start_e AND epoch(created_ts) < $week_end_e
    END AS covers_week
FROM latest
ORDER BY
    gain_rank,
    expected_gain_gpu_h DESC NULLS LAST,
    rec_id
