-- cluster_facts: per cluster, what every recommendation needs to know about it.
--
-- Grain:   one row per cluster with jobs that started in [$since, $until)
-- Reads:   jobs_latest, gpus, job_gpus, data_extent
-- Params:
--   $since  inclusive lower bound on job start (TIMESTAMP, UTC)
--   $until  exclusive upper bound on job start
-- Returns: cluster, target, gpus_total, jobs, kubernetes_jobs, data_start_e, data_end_e
--
-- target is `kueue` when most of the window's jobs came from the Kubernetes collector,
-- else `slurm`. gpus_total is the inventory's GPU count (gpus), else the distinct GPUs the
-- scheduler ever allocated (job_gpus; a node held whole, as much as a job held there).
-- data_start_e/data_end_e (epoch seconds) bound what the window holds: its first job start, and its last job end capped at $until, so averages over
-- time use the span the lake covers rather than the whole window. A job still running ends
-- where the cluster's data end (sql/views/data_extent.sql: the latest sample interval end,
-- scheduler time, collection time or GPU event), not at $until: `detect` run weeks after the
-- data must not stretch the span to its own clock. Only without any data: $until.

WITH lake_end AS (
    SELECT
        cluster,
        epoch(data_end) AS end_e
    FROM data_extent
),
window_jobs AS (
    SELECT
        j.cluster,
        count(*) AS jobs,
        count(*) FILTER (WHERE j.source = 'kubernetes') AS kubernetes_jobs,
        min(epoch(j.start_ts)) AS data_start_e,
        least(
            max(coalesce(epoch(j.end_ts), e.end_e, epoch($until))), epoch($until)
        ) AS data_end_e
    FROM jobs_latest AS j
    LEFT JOIN lake_end AS e
        ON e.cluster = j.cluster
    WHERE j.start_ts >= $since AND j.start_ts < $until
    GROUP BY j.cluster
),
inventory AS (
    SELECT
        cluster,
        count(DISTINCT node || '/' || coalesce(CAST(gpu_index AS VARCHAR), gpu_uuid)) AS gpus
    FROM gpus
    GROUP BY cluster
),
-- per node, the GPUs its allocations name, or where a job held it whole (Kubernetes' whole-node
-- rows name none) the most GPUs such a job held there: counted as one, six 8-GPU nodes were six
-- GPUs, and a cap of "25 % of the cluster" fell back to the largest job
node_allocated AS (
    SELECT
        g.cluster,
        g.node,
        greatest(
            count(DISTINCT coalesce(CAST(g.gpu_index AS VARCHAR), g.gpu_uuid)),
            max(
                CASE WHEN g.gpu_index IS NULL AND g.gpu_uuid IS NULL THEN
                    coalesce(ceil(j.gpus / greatest(len(j.nodes), 1)), 1)
                END
            )
        ) AS gpus
    FROM job_gpus AS g
    LEFT JOIN jobs_latest AS j
        ON j.cluster = g.cluster AND j.job_id = g.job_id
    GROUP BY g.cluster, g.node
),
allocated AS (
    SELECT
        cluster,
        sum(gpus) AS gpus
    FROM node_allocated
    GROUP BY cluster
)
SELECT
    w.cluster,
    CASE WHEN 2 * w.kubernetes_jobs > w.jobs THEN 'kueue' ELSE 'slurm' END AS target,
    coalesce(i.gpus, a.gpus, 0) AS gpus_total,
    w.jobs,
    w.kubernetes_jobs,
    w.data_start_e,
    greatest(w.data_end_e, w.data_start_e) AS data_end_e
FROM window_jobs AS w
LEFT JOIN inventory AS i
    ON i.cluster = w.cluster
LEFT JOIN allocated AS a
    ON a.cluster = w.cluster
ORDER BY w.cluster
