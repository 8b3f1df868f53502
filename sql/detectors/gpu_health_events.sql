-- gpu_health_events: hardware events per GPU and day, classed with NVIDIA's XID catalogue, with
-- the GPU-hours of the jobs running on that GPU when the first one came.
--
-- Grain:   one row per (cluster, node, gpu_uuid, gpu_index, kind, code, day)
-- Reads:   gpu_events, xid_classes, job_gpu_intervals, job_gpu_shares, jobs_latest
-- Params:
--   $since  ignore events before this time (TIMESTAMP, UTC)
-- Returns: cluster, node, gpu_uuid, gpu_index, kind, code, day, events, first_ts, last_ts,
--          xid_class, mnemonic, action, xid_severity, jobs_hit, job_ids, jobs_gpu_h
--
-- xid_class (NVSentinel's mapping, warehouse/data/xid_classes.csv): 'application' for XIDs
-- NVIDIA marks NONFATAL with action RESTART_APP or IGNORE (the job's own fault: 13, 31, 43 …),
-- 'hardware' for the rest, and for 94 (contained ECC), 92 (high SBE rate) and 63/64 (row
-- remapping) whatever their action, 'unknown' for codes not in the catalogue.
-- jobs_gpu_h is the GPU-time the jobs on the GPU had been allocated (on all their GPUs, in
-- their current run) when the first event came: what they lose unless they checkpointed. It
-- is their allocated GPU-time (job_gpu_shares), so jobs sharing a GPU hold it once between
-- them: two jobs on one GPU for 9 h were 18 GPU-h at risk, more than the GPU gave.

WITH events AS (
    SELECT
        e.cluster,
        e.node,
        e.gpu_uuid,
        e.gpu_index,
        e.kind,
        e.code,
        CAST(e.ts AS DATE) AS day,
        count(*) AS events,
        min(e.ts) AS first_ts,
        max(e.ts) AS last_ts
    FROM gpu_events AS e
    WHERE e.ts >= $since
    GROUP BY e.cluster, e.node, e.gpu_uuid, e.gpu_index, e.kind, e.code, CAST(e.ts AS DATE)
),
jobs_on_gpu AS (
    SELECT DISTINCT
        v.cluster,
        v.node,
        v.gpu_index,
        v.kind,
        v.code,
        v.day,
        v.first_ts,
        i.job_id
    FROM events AS v
    JOIN job_gpu_intervals AS i
        ON i.cluster = v.cluster
        AND i.node = v.node
        AND (i.gpu_index IS NULL OR i.gpu_index = v.gpu_index)
        AND i.start_e <= epoch(v.first_ts)
        -- up to its end included: Slurm closes the job an XID kills at the XID's time
        AND epoch(v.first_ts) <= i.end_e
),
hit AS (
    SELECT
        o.cluster,
        o.node,
        o.gpu_index,
        o.kind,
        o.code,
        o.day,
        count(*) AS jobs_hit,
        string_agg(o.job_id, ',' ORDER BY o.job_id) AS job_ids,
        sum(o.held_gpu_h) AS jobs_gpu_h
    FROM (
        -- a synchronous job loses the work of all its GPUs, not only the failing one
        SELECT
            o.cluster,
            o.node,
            o.gpu_index,
            o.kind,
            o.code,
            o.day,
            o.job_id,
            coalesce(sum(
                s.gpus * s.share * greatest(
                    least(s.end_e, epoch(o.first_ts))
                    - greatest(s.start_e, coalesce(epoch(j.start_ts), s.start_e)),
                    0
                )
            ), 0) / 3600.0 AS held_gpu_h
        FROM jobs_on_gpu AS o
        LEFT JOIN jobs_latest AS j
            ON j.cluster = o.cluster AND j.job_id = o.job_id
        LEFT JOIN job_gpu_shares AS s
            ON s.cluster = o.cluster AND s.job_id = o.job_id
        GROUP BY o.cluster, o.node, o.gpu_index, o.kind, o.code, o.day, o.job_id
    ) AS o
    GROUP BY o.cluster, o.node, o.gpu_index, o.kind, o.code, o.day
)
SELECT
    v.cluster,
    v.node,
    v.gpu_uuid,
    v.gpu_index,
    v.kind,
    v.code,
    v.day,
    v.events,
    v.first_ts,
    v.last_ts,
    CASE
        WHEN v.kind <> 'xid' THEN NULL
        WHEN v.code IN (63, 64, 92, 94) THEN 'hardware'
        WHEN x.xid IS NULL THEN 'unknown'
        WHEN x.severity = 'NONFATAL' AND x.action IN ('RESTART_APP', 'IGNORE') THEN 'application'
        ELSE 'hardware'
    END AS xid_class,
    x.mnemonic,
    x.action,
    x.severity AS xid_severity,
    coalesce(h.jobs_hit, 0) AS jobs_hit,
    h.job_ids,
    coalesce(h.jobs_gpu_h, 0.0) AS jobs_gpu_h
FROM events AS v
LEFT JOIN xid_classes AS x
    ON v.kind = 'xid' AND x.xid = v.code
LEFT JOIN hit AS h
    ON h.cluster = v.cluster
    AND h.node = v.node
    AND h.gpu_index IS NOT DISTINCT FROM v.gpu_index
    AND h.kind = v.kind
    AND h.code IS NOT DISTINCT FROM v.code
    AND h.day = v.day
ORDER BY v.cluster, v.node, v.gpu_index, v.first_ts
