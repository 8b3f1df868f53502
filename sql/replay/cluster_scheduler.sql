-- cluster_scheduler: which scheduler a replay of one cluster models: Kueue when most of its
-- jobs came from the Kubernetes collector, else Slurm.
--
-- Grain:   one row
-- Reads:   jobs_latest
-- Params:
--   $cluster  the cluster
-- Returns: jobs, kubernetes_jobs, scheduler (`kueue` or `slurm`)
--
-- The rule is the recommenders' (sql/recommend/cluster_facts.sql): more than half the jobs.

SELECT
    count(*) AS jobs,
    count(*) FILTER (WHERE source = 'kubernetes') AS kubernetes_jobs,
    CASE
        WHEN count(*) FILTER (WHERE source = 'kubernetes') * 2 > count(*) THEN 'kueue'
        ELSE 'slurm'
    END AS scheduler
FROM jobs_latest
WHERE cluster = $cluster
