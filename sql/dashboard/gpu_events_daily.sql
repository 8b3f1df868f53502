-- gpu_events_daily: hardware events per UTC day and kind, for the Health page's chart.
--
-- Grain:   one row per (day, kind)
-- Reads:   gpu_events
-- Params:
--   $cluster  the cluster
--   $start    inclusive lower bound on ts (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      exclusive upper bound on ts
-- Returns: day, kind, events, gpus

SELECT
    CAST(ts AS DATE) AS day,
    kind,
    count(*) AS events,
    count(DISTINCT coalesce(gpu_uuid, node || ':' || CAST(gpu_index AS VARCHAR))) AS gpus
FROM gpu_events
WHERE cluster = $cluster
    AND ts >= $start
    AND ts < $end
GROUP BY day, kind
ORDER BY day, kind
