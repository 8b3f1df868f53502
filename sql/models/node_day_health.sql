-- node_day_health: one node's health and job outcomes per UTC day, the lemon-node model's input.
--
-- Grain:   one row per (cluster, node, day) with samples
-- Reads:   gpu_samples, gpu_events, job_outcomes, jobs_latest
-- Params:  none
-- Returns: cluster, node, day, gpus, sbe_max, remap_pending_frac, throttle_frac, temp_mean,
--          xids, jobs_ended, jobs_failed
--
-- jobs_failed counts jobs that ended on the node that day as failed (not cancelled or timed out).

WITH samples AS (
    SELECT
        cluster,
        node,
        CAST(ts AS DATE) AS day,
        count(DISTINCT gpu_uuid) AS gpus,
        max(ecc_sbe_volatile) AS sbe_max,
        avg(CASE WHEN remap_pending THEN 1.0 ELSE 0.0 END) AS remap_pending_frac,
        avg(CASE WHEN (clock_event_reasons & 104) <> 0 THEN 1.0 ELSE 0.0 END) AS throttle_frac,
        avg(temp_c) AS temp_mean
    FROM gpu_samples
    GROUP BY cluster, node, day
),
events AS (
    SELECT
        cluster,
        node,
        CAST(ts AS DATE) AS day,
        count(*) AS xids
    FROM gpu_events
    WHERE kind = 'xid'
    GROUP BY cluster, node, day
),
ended AS (
    SELECT
        j.cluster,
        n.node,
        CAST(j.end_ts AS DATE) AS day,
        count(*) AS jobs_ended,
        count(*) FILTER (WHERE o.failed) AS jobs_failed
    FROM jobs_latest AS j
    CROSS JOIN unnest(j.nodes) AS n(node)
    JOIN job_outcomes AS o
        ON o.cluster = j.cluster AND o.job_id = j.job_id
    WHERE j.end_ts IS NOT NULL
    GROUP BY j.cluster, n.node, day
)
SELECT
    s.cluster,
    s.node,
    s.day,
    s.gpus,
    s.sbe_max,
    s.remap_pending_frac,
    s.throttle_frac,
    s.temp_mean,
    coalesce(e.xids, 0) AS xids,
    coalesce(d.jobs_ended, 0) AS jobs_ended,
    coalesce(d.jobs_failed, 0) AS jobs_failed
FROM samples AS s
LEFT JOIN events AS e
    ON e.cluster = s.cluster AND e.node = s.node AND e.day = s.day
LEFT JOIN ended AS d
    ON d.cluster = s.cluster AND d.node = s.node AND d.day = s.day
ORDER BY s.cluster, s.node, s.day
