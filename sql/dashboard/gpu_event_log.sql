-- gpu_event_log: the hardware events of a window, newest first, with NVIDIA's XID meaning.
--
-- Grain:   one row per event
-- Reads:   gpu_events, xid_classes
-- Params:
--   $cluster  the cluster
--   $start    inclusive lower bound on ts (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      exclusive upper bound on ts
--   $needle   lower-case text the node, GPU UUID or detail must contain ('' = any)
--   $limit    at most this many rows
-- Returns: ts, node, gpu_index, gpu_uuid, kind, code, detail, xid_name, xid_action, xid_severity

SELECT
    e.ts,
    e.node,
    e.gpu_index,
    e.gpu_uuid,
    e.kind,
    e.code,
    e.detail,
    x.mnemonic AS xid_name,
    x.action AS xid_action,
    x.severity AS xid_severity
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
        OR contains(lower(coalesce(e.detail, '')), $needle)
    )
ORDER BY e.ts DESC, e.node, e.gpu_index
LIMIT $limit
