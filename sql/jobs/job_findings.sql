-- job_findings: the findings the detectors raised about one job.
--
-- Grain:   one row per finding
-- Reads:   findings
-- Params:
--   $cluster  the job's cluster
--   $job_id   the job id
-- Returns: finding_id, detector, severity, subject_kind, subject_id, node, gpu_uuid, start_ts,
--          end_ts, detected_ts, predicted, score, gpu_h_at_stake, message, evidence,
--          config_id (the configuration that produced it: evidence.config.id, NULL for
--          findings stored before it was recorded)
--
-- A finding landed more than once (found again) is shown once, as last detected. Critical
-- first, then warnings, then the rest; newest first within a severity.

SELECT
    finding_id,
    detector,
    severity,
    subject_kind,
    subject_id,
    node,
    gpu_uuid,
    start_ts,
    end_ts,
    detected_ts,
    predicted,
    score,
    gpu_h_at_stake,
    message,
    evidence,
    json_extract_string(evidence, '$.config.id') AS config_id
FROM findings
WHERE cluster = $cluster AND job_id = $job_id
QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY detected_ts DESC) = 1
ORDER BY
    CASE severity WHEN 'critical' THEN 0 WHEN 'warn' THEN 1 ELSE 2 END,
    detected_ts DESC,
    finding_id
