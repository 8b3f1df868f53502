-- findings_feed: what the detectors found in a window, newest first, filtered as a page asks.
--
-- Grain:   one row per (cluster, finding_id)
-- Reads:   findings
-- Params:
--   $cluster        the cluster
--   $start          only findings whose span reaches this (TIMESTAMP WITH TIME ZONE, UTC)
--   $end            only findings whose span starts before this
--   $viewer         only findings about this user, or NULL for all
--                   (a user name matches in any case)
--   $needle         lower-case text that message, detector, subject, job, user, account or
--                   node must contain ('' = any)
--   $severities     severities to keep (VARCHAR[]; empty = any)
--   $subject_kinds  subject kinds to keep (VARCHAR[]; empty = any)
--   $job_id         only findings about this job, or NULL
--   $limit          at most this many rows
-- Returns: finding_id, status, severity, detector, subject_kind, subject_id, job_id, user,
--          account, node, gpu_uuid, start_ts, end_ts, detected_ts, predicted, score,
--          gpu_h_at_stake, message, evidence, config_id (the configuration that produced
--          it: evidence.config.id, NULL for findings stored before it was recorded)
--
-- status is 'open' while the finding's span has no end, else 'ended'. A finding without a
-- span counts at its detection time.

SELECT
    finding_id,
    CASE WHEN end_ts IS NULL THEN 'open' ELSE 'ended' END AS status,
    severity,
    detector,
    subject_kind,
    subject_id,
    job_id,
    user,
    account,
    node,
    gpu_uuid,
    start_ts,
    end_ts,
    detected_ts,
    coalesce(predicted, false) AS predicted,
    score,
    gpu_h_at_stake,
    message,
    evidence,
    json_extract_string(evidence, '$.config.id') AS config_id
FROM findings
WHERE cluster = $cluster
    AND coalesce(end_ts, detected_ts) >= $start
    AND coalesce(start_ts, detected_ts) < $end
    AND ($viewer IS NULL OR lower(user) = lower($viewer))
    AND ($job_id IS NULL OR job_id = $job_id)
    AND (len($severities) = 0 OR list_contains($severities, severity))
    AND (len($subject_kinds) = 0 OR list_contains($subject_kinds, subject_kind))
    AND (
        $needle = ''
        OR contains(lower(coalesce(message, '')), $needle)
        OR contains(lower(detector), $needle)
        OR contains(lower(subject_id), $needle)
        OR contains(lower(coalesce(job_id, '')), $needle)
        OR contains(lower(coalesce(user, '')), $needle)
        OR contains(lower(coalesce(account, '')), $needle)
        OR contains(lower(coalesce(node, '')), $needle)
    )
ORDER BY
    CASE severity WHEN 'critical' THEN 0 WHEN 'warn' THEN 1 ELSE 2 END,
    detected_ts DESC,
    finding_id
LIMIT $limit
