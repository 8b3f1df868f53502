-- job_host_requests: single-node GPU jobs with their CPU and memory requests and what their node
-- holds, to tell which jobs leave the node's other GPUs unusable.
--
-- Grain:   one row per (cluster, job_id) of single-node jobs with GPUs and a CPU request
-- Reads:   jobs_latest, gpus, data_extent
-- Params:
--   $since  ignore jobs that ended before this time (TIMESTAMP, UTC)
-- Returns: cluster, job_id, user, account, start_ts, end_ts, runtime_s, node, gpus, cpus,
--          mem_req_mib, node_gpus, node_cpus_seen, node_mem_mib_seen, data_end
--
-- A node's CPUs and memory are not in the lake; node_cpus_seen / node_mem_mib_seen are the
-- most its jobs ever held at once (a lower bound that equals the node's size once it has been
-- full). node_gpus comes from the inventory, else the most GPUs its jobs held at once.
-- runtime_s is null for a job still running: the rule counts it up to data_end, the end of its
-- cluster's data (views/data_extent), never to the wall clock.

WITH single AS (
    SELECT
        j.cluster,
        j.job_id,
        j.user,
        j.account,
        j.start_ts,
        -- a running job holds its CPUs to the end of the data: ended at its start, it never
        -- counted in what the node held at once (and the jobs beside it stranded more)
        coalesce(j.end_ts, greatest(x.data_end, j.start_ts), j.start_ts) AS end_ts,
        j.end_ts AS ended_ts,
        j.nodes[1] AS node,
        j.gpus,
        j.cpus,
        j.mem_req_mib
    FROM jobs_latest AS j
    LEFT JOIN data_extent AS x
        ON x.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
        AND array_length(j.nodes) = 1
        AND j.gpus > 0
        AND j.cpus > 0
),
changes AS (
    SELECT cluster, node, start_ts AS ts, cpus AS d_cpus, coalesce(mem_req_mib, 0) AS d_mem,
        gpus AS d_gpus
    FROM single
    UNION ALL
    SELECT cluster, node, end_ts AS ts, -cpus AS d_cpus, -coalesce(mem_req_mib, 0) AS d_mem,
        -gpus AS d_gpus
    FROM single
),
held AS (
    SELECT
        cluster,
        node,
        sum(d_cpus) OVER node_time AS cpus_held,
        sum(d_mem) OVER node_time AS mem_held,
        sum(d_gpus) OVER node_time AS gpus_held
    FROM changes
    -- ends sort before starts at the same instant: a node handed over is not double-booked
    WINDOW node_time AS (
        PARTITION BY cluster, node
        ORDER BY ts, d_cpus
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    )
),
node_size AS (
    SELECT
        cluster,
        node,
        CAST(max(cpus_held) AS DOUBLE) AS node_cpus_seen,
        CAST(max(mem_held) AS DOUBLE) AS node_mem_mib_seen,
        CAST(max(gpus_held) AS DOUBLE) AS node_gpus_seen
    FROM held
    GROUP BY cluster, node
),
inventory AS (
    SELECT
        cluster,
        node,
        count(*) AS gpus
    FROM gpus
    GROUP BY cluster, node
)
SELECT
    s.cluster,
    s.job_id,
    s.user,
    s.account,
    s.start_ts,
    s.ended_ts AS end_ts,
    epoch(s.ended_ts) - epoch(s.start_ts) AS runtime_s,
    s.node,
    s.gpus,
    s.cpus,
    s.mem_req_mib,
    coalesce(CAST(i.gpus AS DOUBLE), n.node_gpus_seen) AS node_gpus,
    n.node_cpus_seen,
    n.node_mem_mib_seen,
    x.data_end
FROM single AS s
JOIN node_size AS n
    ON n.cluster = s.cluster AND n.node = s.node
LEFT JOIN inventory AS i
    ON i.cluster = s.cluster AND i.node = s.node
LEFT JOIN data_extent AS x
    ON x.cluster = s.cluster
WHERE s.ended_ts IS NULL OR s.ended_ts >= $since
ORDER BY s.cluster, s.job_id
