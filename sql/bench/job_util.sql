-- job_util: every job's mean GPU utilisation, what the jobstats scenario compares with the peer.
--
-- Grain:   one row per (cluster, job_id) of job_usage
-- Reads:   job_usage
-- Params:  none
-- Returns: cluster, job_id, gpu_util_pct_mean (0-100, time-weighted over its samples)

SELECT
    cluster,
    job_id,
    gpu_util_pct_mean
FROM job_usage
ORDER BY cluster, job_id
