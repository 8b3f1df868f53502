-- running_by_account: jobs running at the end of each cluster's data and the GPUs they hold,
-- per account and partition (`gpuledger serve`; every running job, before any cap).
--
-- Grain:   one row per (cluster, account, partition) with a running job
-- Reads:   jobs_latest, data_extent
-- Params:  none
-- Returns: cluster, account, partition, running_jobs, allocated_gpus
--
-- Running as in running_jobs: started at or before the end of the cluster's data, and no end
-- time in the job's latest version.

SELECT
    j.cluster,
    j.account,
    j.partition,
    count(*) AS running_jobs,
    coalesce(sum(j.gpus), 0) AS allocated_gpus
FROM jobs_latest AS j
JOIN data_extent AS e
    ON e.cluster = j.cluster
WHERE j.start_ts IS NOT NULL
    AND j.start_ts <= e.data_end
    AND j.end_ts IS NULL
GROUP BY j.cluster, j.account, j.partition
ORDER BY j.cluster, j.account NULLS LAST, j.partition NULLS LAST
