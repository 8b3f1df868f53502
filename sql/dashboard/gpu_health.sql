-- gpu_health: per GPU, the hardware events of a window — XIDs, ECC, row remaps, throttling.
--
-- Grain:   one row per (node, gpu_index, gpu_uuid) that had an event in the window
-- Reads:   gpu_events, xid_classes
-- Params:
--   $cluster  the cluster
--   $start    inclusive lower bound on ts (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      exclusive upper bound on ts
--   $needle   lower-case text the node or GPU UUID must contain ('' = any)
-- Returns: node, gpu_index, gpu_uuid, xids, fatal_xids, last_xid, ecc_dbe, row_remap_failures,
--          throttle_events, offline_events, first_event_ts, last_event_ts
--
-- A fatal XID is one NVIDIA's catalogue (xid_classes) marks FATAL; throttling counts HW
-- slowdown, thermal and power-brake events.

SELECT
    e.node,
    e.gpu_index,
    e.gpu_uuid,
    count(*) FILTER (WHERE e.kind = 'xid') AS xids,
    count(*) FILTER (WHERE e.kind = 'xid' AND x.severity = 'FATAL') AS fatal_xids,
    arg_max(e.code, e.ts) FILTER (WHERE e.kind = 'xid') AS last_xid,
    count(*) FILTER (WHERE e.kind = 'ecc_dbe') AS ecc_dbe,
    count(*) FILTER (WHERE e.kind = 'row_remap_failure') AS row_remap_failures,
    count(*) FILTER (WHERE e.kind IN ('hw_slowdown', 'thermal', 'power_brake')) AS throttle_events,
    count(*) FILTER (WHERE e.kind = 'offline') AS offline_events,
    min(e.ts) AS first_event_ts,
    max(e.ts) AS last_event_ts
FROM gpu_events AS e
LEFT JOIN xid_classes AS x
    ON e.kind = 'xid'
    AND x.xid = e.code
WHERE e.cluster = $cluster
    AND e.ts >= $start
    AND e.ts < $end
    AND (
        $needle = ''
        OR contains(lower(e.node), $needle)
        OR contains(lower(coalesce(e.gpu_uuid, '')), $needle)
    )
GROUP BY e.node, e.gpu_index, e.gpu_uuid
ORDER BY fatal_xids DESC, ecc_dbe + row_remap_failures DESC, xids DESC, e.node, e.gpu_index
