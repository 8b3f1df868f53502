-- failure_risk_by_node: nodes ranked by predicted hardware failure, and which to drain.
--
-- Grain:   one row per node with a predicted (predicted = true) GPU or node finding
-- Reads:   findings
-- Params:
--   $cluster      the cluster
--   $start        only findings whose span reaches this (TIMESTAMP WITH TIME ZONE, UTC)
--   $end          only findings whose span starts before this
--   $drain_score  a node whose highest score reaches this (0-1) is a drain candidate
-- Returns: node, risk_score, gpus_at_risk, findings, critical_findings, gpu_h_at_stake,
--          detectors, last_detected_ts, drain_candidate
--
-- A critical predicted finding makes its node a drain candidate whatever its score.

SELECT
    coalesce(node, subject_id) AS node,
    max(coalesce(score, 0)) AS risk_score,
    count(DISTINCT gpu_uuid) AS gpus_at_risk,
    count(*) AS findings,
    count(*) FILTER (WHERE severity = 'critical') AS critical_findings,
    sum(gpu_h_at_stake) AS gpu_h_at_stake,
    string_agg(DISTINCT detector, ', ' ORDER BY detector) AS detectors,
    max(detected_ts) AS last_detected_ts,
    max(coalesce(score, 0)) >= $drain_score
        OR count(*) FILTER (WHERE severity = 'critical') > 0 AS drain_candidate
FROM findings
WHERE cluster = $cluster
    AND predicted
    AND subject_kind IN ('gpu', 'node')
    AND coalesce(end_ts, detected_ts) >= $start
    AND coalesce(start_ts, detected_ts) < $end
GROUP BY coalesce(node, subject_id)
ORDER BY drain_candidate DESC, risk_score DESC, node
