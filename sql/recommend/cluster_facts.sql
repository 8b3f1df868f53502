-- cluster_facts: per cluster, what every recommendation needs to know about it.
--
-- Grain:   one row per cluster with jobs that started in [$since, $until)
-- Reads:   jobs_latest, gpus, job_gpus
-- Params:
--   $since  inclusive lower bound on job start (TIMESTAMP, UTC)
--   $until  exclusive upper bound on job start
-- Returns: cluster, target, gpus_total, jobs, kubernetes_jobs, window_start_e, window_end_e
--
-- target is `kueue` when most of the window's jobs came from the Kubernetes collector,
-- else `slurm`. gpus_total is the inventory's GPU count (gpus), else the distinct GPUs the
-- scheduler ever allocated (job_gpus). The window is [$since, $until) in epoch seconds.

WITH window_jobs AS (
    SELECT
        cluster,
        count(*) AS jobs,
        count(*) FILTER (WHERE source = 'kubernetes') AS kubernetes_jobs
    FROM jobs_latest
    WHERE start_ts >= $since AND start_ts < $until
    GROUP BY cluster
),
inventory AS (
    SELECT
        cluster,
        count(DISTINCT node || '/' || coalesce(CAST(gpu_index AS VARCHAR), gpu_uuid)) AS gpus
    FROM gpus
    GROUP BY cluster
),
allocated AS (
    SELECT
        cluster,
        count(DISTINCT node || '/' || coalesce(CAST(gpu_index AS VARCHAR), gpu_uuid, '*')) AS gpus
    FROM job_gpus
    GROUP BY cluster
)
SELECT
    w.cluster,
    CASE WHEN 2 * w.kubernetes_jobs > w.jobs THEN 'kueue' ELSE 'slurm' END AS target,
    coalesce(i.gpus, a.gpus, 0) AS gpus_total,
    w.jobs,
    w.kubernetes_jobs,
    epoch($since) AS window_start_e,
    epoch($until) AS window_end_e
FROM window_jobs AS w
LEFT JOIN inventory AS i
    ON i.cluster = w.cluster
LEFT JOIN allocated AS a
    ON a.cluster = w.cluster
ORDER BY w.cluster
