-- gpu_failures: the hardware failures the failing-GPU model predicts, one row per GPU and time.
--
-- Grain:   one row per (cluster, gpu_uuid, ts) with a failure event
-- Reads:   gpu_events
-- Params:  none
-- Returns: cluster, gpu_uuid, node, ts, kinds
--
-- A failure is an uncorrectable error: XID 48 (double-bit ECC), 79 (fell off the bus), 94/95
-- (contained/uncontained ECC), an ECC DBE event or a row-remap failure. Events of one GPU at
-- the same instant are one failure.

SELECT
    cluster,
    gpu_uuid,
    any_value(node) AS node,
    ts,
    string_agg(
        DISTINCT kind || coalesce(' ' || CAST(code AS VARCHAR), ''), ', '
        ORDER BY kind || coalesce(' ' || CAST(code AS VARCHAR), '')
    ) AS kinds
FROM gpu_events
WHERE gpu_uuid IS NOT NULL
    AND ((kind = 'xid' AND code IN (48, 79, 94, 95)) OR kind IN ('ecc_dbe', 'row_remap_failure'))
GROUP BY cluster, gpu_uuid, ts
ORDER BY cluster, gpu_uuid, ts
