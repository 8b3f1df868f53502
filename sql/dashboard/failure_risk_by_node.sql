-- failure_risk_by_node: nodes at hardware risk, and which to drain.
--
-- Grain:   one row per node with a predicted or critical GPU/node finding, or a drain_node
--          recommendation
-- Reads:   findings, recommendations
-- Params:
--   $cluster      the cluster
--   $start        only findings whose span reaches this (TIMESTAMP WITH TIME ZONE, UTC)
--   $end          only findings whose span starts before this
--   $drain_score  a node whose highest predicted score reaches this (0-1) is a drain candidate
-- Returns: node, risk_score, gpus_at_risk, findings, critical_findings, gpu_h_at_stake,
--          detectors, first_event_ts, last_event_ts, last_detected_ts, drain_recommended,
--          drain_candidate, drain_reason
--
-- A node is a drain candidate when `recommend` proposes draining it (a drain_node
-- recommendation, the cluster's current advice), a hardware detector found something critical
-- on it (XID 79, double-bit ECC, row-remap failure; predicted or not), or the trained models
-- predict a failure with a score ≥ $drain_score; drain_reason names which. risk_score is the
-- highest predicted score (null where nothing was predicted, e.g. models not trained).
-- first_event_ts / last_event_ts span what the findings are about (their start_ts / end_ts);
-- last_detected_ts is when `gpuledger detect` last raised one. gpu_h_at_stake is the larger of
-- the findings' GPU-hours at stake and the drain_node recommendation's expected gain (the GPU
-- time failed jobs held on the node): the two overlap, so they are not added.

WITH hardware AS (
    SELECT
        coalesce(node, subject_id) AS node,
        predicted,
        score,
        severity,
        gpu_uuid,
        gpu_h_at_stake,
        detector,
        start_ts,
        end_ts,
        detected_ts
    FROM findings
    WHERE cluster = $cluster
        AND subject_kind IN ('gpu', 'node')
        AND (predicted OR severity = 'critical')
        AND coalesce(end_ts, detected_ts) >= $start
        AND coalesce(start_ts, detected_ts) < $end
),
per_node AS (
    SELECT
        node,
        max(coalesce(score, 0)) FILTER (WHERE predicted) AS risk_score,
        count(DISTINCT gpu_uuid) AS gpus_at_risk,
        count(*) AS findings,
        count(*) FILTER (WHERE severity = 'critical') AS critical_findings,
        sum(gpu_h_at_stake) AS gpu_h_at_stake,
        string_agg(DISTINCT detector, ', ' ORDER BY detector) AS detectors,
        min(coalesce(start_ts, end_ts, detected_ts)) AS first_event_ts,
        max(coalesce(end_ts, start_ts, detected_ts)) AS last_event_ts,
        max(detected_ts) AS last_detected_ts
    FROM hardware
    GROUP BY node
),
drain_recs AS (
    SELECT
        substr(scope, 6) AS node,
        max(expected_gain_gpu_h) AS drain_gain_gpu_h
    FROM recommendations
    WHERE cluster = $cluster
        AND kind = 'drain_node'
        AND scope LIKE 'node=%'
    GROUP BY substr(scope, 6)
),
joined AS (
    SELECT
        coalesce(p.node, r.node) AS node,
        p.risk_score,
        coalesce(p.gpus_at_risk, 0) AS gpus_at_risk,
        coalesce(p.findings, 0) AS findings,
        coalesce(p.critical_findings, 0) AS critical_findings,
        greatest(coalesce(p.gpu_h_at_stake, 0), coalesce(r.drain_gain_gpu_h, 0))
            AS gpu_h_at_stake,
        p.detectors,
        p.first_event_ts,
        p.last_event_ts,
        p.last_detected_ts,
        r.node IS NOT NULL AS drain_recommended,
        coalesce(p.risk_score >= $drain_score, false) AS predicted_risk
    FROM per_node AS p
    FULL OUTER JOIN drain_recs AS r
        ON p.node = r.node
)
SELECT
    node,
    risk_score,
    gpus_at_risk,
    findings,
    critical_findings,
    gpu_h_at_stake,
    detectors,
    first_event_ts,
    last_event_ts,
    last_detected_ts,
    drain_recommended,
    drain_recommended OR critical_findings > 0 OR predicted_risk AS drain_candidate,
    nullif(
        concat_ws(
            '; ',
            CASE WHEN drain_recommended THEN 'drain_node recommendation' END,
            CASE WHEN critical_findings > 0 THEN 'critical hardware finding' END,
            CASE WHEN predicted_risk THEN 'predicted failure risk' END
        ),
        ''
    ) AS drain_reason
FROM joined
ORDER BY drain_candidate DESC, risk_score DESC NULLS LAST, critical_findings DESC, node
