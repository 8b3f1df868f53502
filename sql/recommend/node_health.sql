-- node_health: per node, hardware events, critical findings and job failures over the window.
--
-- Grain:   one row per (cluster, node) that ran jobs or had hardware events in the window
-- Reads:   gpu_events, xid_classes, findings, job_gpu_shares, job_outcomes, jobs_latest
-- Params:
--   $since  inclusive lower bound (TIMESTAMP, UTC) on event time and job start
--   $until  exclusive upper bound
-- Returns: cluster, node, gpus, hw_events, hw_event_kinds, critical_findings, jobs,
--          failed_jobs, failed_gpu_h, held_gpu_h, trouble_e, healthy_jobs_since
--
-- A hardware event is an XID that NVIDIA's catalogue marks FATAL (xid_classes), an ECC
-- double-bit error, a row-remap failure or a GPU gone offline. failed_gpu_h is the GPU time
-- failed jobs held on this node (their GPUs here × how long they held them, a GPU held by
-- several jobs at once split evenly among them, as in job_usage); held_gpu_h is the GPU time
-- all jobs held on it, the base for comparing its failures with the cluster's. trouble_e is
-- the time (epoch seconds) of the node's last hardware event or critical finding in the window
-- (null without either; a finding's time is the end of the span it covers, else its start,
-- since detected_ts is when `detect` ran), and healthy_jobs_since counts the jobs that started
-- on the node at or after it and completed (a job cancelled, timed out, preempted or requeued
-- there proves nothing): a node back in service that runs jobs to a successful end again came
-- back from its trouble (repaired, or it was transient).

WITH hw AS (
    SELECT
        e.cluster,
        e.node,
        count(*) AS hw_events,
        string_agg(DISTINCT CASE
            WHEN e.kind = 'xid' THEN 'xid ' || CAST(e.code AS VARCHAR)
            ELSE e.kind
        END, ', ' ORDER BY CASE
            WHEN e.kind = 'xid' THEN 'xid ' || CAST(e.code AS VARCHAR)
            ELSE e.kind
        END) AS hw_event_kinds,
        max(epoch(e.ts)) AS last_hw_e
    FROM gpu_events AS e
    LEFT JOIN xid_classes AS x
        ON e.kind = 'xid' AND x.xid = e.code
    WHERE e.ts >= $since
        AND e.ts < $until
        AND (
            e.kind IN ('ecc_dbe', 'row_remap_failure', 'offline')
            OR (e.kind = 'xid' AND x.severity = 'FATAL')
        )
    GROUP BY e.cluster, e.node
),
crit AS (
    SELECT
        cluster,
        node,
        count(*) AS critical_findings,
        -- when the trouble was last seen: the span the finding covers, not when detect ran
        max(epoch(coalesce(end_ts, start_ts, detected_ts))) AS last_crit_e
    FROM findings
    -- in the window by the span it covers too: the findings `detect` stores in the same run
    -- are stamped with its time, the window's end
    WHERE severity = 'critical'
        AND node IS NOT NULL
        AND coalesce(end_ts, start_ts, detected_ts) >= $since
        AND coalesce(start_ts, end_ts, detected_ts) < $until
    GROUP BY cluster, node
),
held AS (
    SELECT
        i.cluster,
        i.node,
        i.job_id,
        min(i.start_e) AS start_e,
        bool_or(j.end_ts IS NOT NULL) AS ended,
        sum((i.end_e - i.start_e) * i.gpus * i.share) / 3600.0 AS gpu_h
    FROM job_gpu_shares AS i
    JOIN jobs_latest AS j
        ON j.cluster = i.cluster AND j.job_id = i.job_id
    WHERE j.start_ts >= $since AND j.start_ts < $until
        AND i.node IS NOT NULL  -- (a job without job_gpus rows holds GPUs on no known node)
    GROUP BY i.cluster, i.node, i.job_id
),
trouble AS (
    SELECT
        cluster,
        node,
        max(t_e) AS trouble_e
    FROM (
        SELECT cluster, node, last_hw_e AS t_e FROM hw
        UNION ALL
        SELECT cluster, node, last_crit_e AS t_e FROM crit
    )
    GROUP BY cluster, node
),
per_node AS (
    SELECT
        h.cluster,
        h.node,
        count(DISTINCT h.job_id) AS jobs,
        count(DISTINCT h.job_id) FILTER (WHERE o.failed) AS failed_jobs,
        coalesce(sum(h.gpu_h) FILTER (WHERE o.failed), 0) AS failed_gpu_h,
        coalesce(sum(h.gpu_h), 0) AS held_gpu_h,
        count(DISTINCT h.job_id) FILTER (
            WHERE h.start_e >= t.trouble_e AND h.ended AND o.outcome = 'completed'
        ) AS healthy_jobs_since
    FROM held AS h
    LEFT JOIN job_outcomes AS o
        ON o.cluster = h.cluster AND o.job_id = h.job_id
    LEFT JOIN trouble AS t
        ON t.cluster = h.cluster AND t.node = h.node
    GROUP BY h.cluster, h.node
),
node_gpus AS (
    SELECT
        cluster,
        node,
        count(DISTINCT coalesce(CAST(gpu_index AS VARCHAR), gpu_uuid)) AS gpus
    FROM job_gpus
    GROUP BY cluster, node
),
nodes AS (
    SELECT cluster, node FROM hw
    UNION
    SELECT cluster, node FROM per_node
    UNION
    SELECT cluster, node FROM crit
)
SELECT
    n.cluster,
    n.node,
    coalesce(g.gpus, 0) AS gpus,
    coalesce(hw.hw_events, 0) AS hw_events,
    hw.hw_event_kinds,
    coalesce(c.critical_findings, 0) AS critical_findings,
    coalesce(p.jobs, 0) AS jobs,
    coalesce(p.failed_jobs, 0) AS failed_jobs,
    coalesce(p.failed_gpu_h, 0) AS failed_gpu_h,
    coalesce(p.held_gpu_h, 0) AS held_gpu_h,
    t.trouble_e,
    coalesce(p.healthy_jobs_since, 0) AS healthy_jobs_since
FROM nodes AS n
LEFT JOIN hw
    ON hw.cluster = n.cluster AND hw.node = n.node
LEFT JOIN crit AS c
    ON c.cluster = n.cluster AND c.node = n.node
LEFT JOIN per_node AS p
    ON p.cluster = n.cluster AND p.node = n.node
LEFT JOIN trouble AS t
    ON t.cluster = n.cluster AND t.node = n.node
LEFT JOIN node_gpus AS g
    ON g.cluster = n.cluster AND g.node = n.node
ORDER BY n.cluster, n.node
