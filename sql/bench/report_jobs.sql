-- report_jobs: the attributed jobs, largest first, to time `gpuledger job` on a spread of them.
--
-- Grain:   one row per (cluster, job_id) of job_usage with samples
-- Reads:   job_usage
-- Params:  none
-- Returns: cluster, job_id, gpus, alloc_gpu_h

SELECT
    cluster,
    job_id,
    gpus,
    alloc_gpu_h
FROM job_usage
WHERE samples > 0
ORDER BY alloc_gpu_h DESC, cluster, job_id
