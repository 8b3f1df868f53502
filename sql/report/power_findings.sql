-- power_findings: what the detectors found about power in a week — power-cap savings and other
-- power findings — per detector, with the GPU-hours at stake.
--
-- Grain:   one row per detector whose name mentions power or energy
-- Reads:   findings
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: detector, findings, gpu_h_at_stake, example
--
-- A finding counts for the week when its span [start_ts, end_ts) overlaps it (detected_ts
-- where the span is unknown).

SELECT
    detector,
    count(DISTINCT finding_id) AS findings,
    sum(coalesce(gpu_h_at_stake, 0)) AS gpu_h_at_stake,
    arg_max(message, coalesce(gpu_h_at_stake, 0)) AS example
FROM findings
WHERE cluster = $cluster
    AND (lower(detector) LIKE '%power%' OR lower(detector) LIKE '%energy%')
    AND epoch(coalesce(start_ts, detected_ts)) < $week_end_e
    AND epoch(coalesce(end_ts, detected_ts)) >= $week_start_e
GROUP BY detector
ORDER BY gpu_h_at_stake DESC, detector
