-- recommendations_latest: the newest version of every recommendation, with what its gain counts
-- and where it ranks — the one definition the weekly report and the dashboard both read.
--
-- Grain:   one row per (cluster, rec_id)
-- Reads:   recommendations
-- Params:  none
-- Returns: every column of recommendations, gain_kind, gain_rank
--
-- gain_kind (what expected_gain_gpu_h counts: detectors/recommend/recommendation.py GAIN_KINDS)
-- is the evidence's `gain_kind`, else (stored before it was recorded) the one its kind makes;
-- null without a gain. gain_rank is the order to show them in: 0 nodes to drain (never left out
-- of a short list), 1 GPU-hours saved (or failures avoided), 2 gains that are not savings
-- (reserved time released to backfill, GPU-hours shifted between users), 3 no gain. Readers
-- sort by gain_rank, then expected_gain_gpu_h DESC NULLS LAST, then rec_id.

SELECT
    cluster,
    rec_id,
    kind,
    scope,
    target,
    evidence,
    expected_gain_gpu_h,
    risk,
    config,
    created_ts,
    gain_kind,
    CASE
        WHEN kind = 'drain_node' THEN 0
        WHEN gain_kind IN ('saved', 'failures_avoided') THEN 1
        WHEN expected_gain_gpu_h IS NOT NULL THEN 2
        ELSE 3
    END AS gain_rank
FROM (
    SELECT
        cluster,
        rec_id,
        kind,
        scope,
        target,
        evidence,
        expected_gain_gpu_h,
        risk,
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
        row_number() OVER (PARTITION BY cluster, rec_id ORDER BY created_ts DESC) AS version_rank
    FROM recommendations
) AS versions
WHERE version_rank = 1
