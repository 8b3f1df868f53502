-- findings_open: open findings (a span with no end yet) per cluster, detector and severity.
--
-- Grain:   one row per (cluster, detector, severity) with an open finding
-- Reads:   findings
-- Params:  none
-- Returns: cluster, detector, severity, findings, gpu_h_at_stake
--
-- A finding is open while its span has no end, as the dashboard's feed says (status 'open');
-- where a finding was stored more than once, its latest detection counts. gpu_h_at_stake sums
-- the open findings' own figures (0 where none is given).

WITH latest AS (
    SELECT
        cluster,
        finding_id,
        detector,
        severity,
        end_ts,
        gpu_h_at_stake
    FROM findings
    QUALIFY row_number() OVER (PARTITION BY cluster, finding_id ORDER BY detected_ts DESC) = 1
)
SELECT
    cluster,
    detector,
    severity,
    count(*) AS findings,
    coalesce(sum(gpu_h_at_stake), 0) AS gpu_h_at_stake
FROM latest
WHERE end_ts IS NULL
GROUP BY cluster, detector, severity
ORDER BY cluster, detector, severity
