-- training_throughput: the jobs of a week whose training loop reported its throughput, largest
-- first — tokens/s per GPU, the model's size and its MFU.
--
-- Grain:   one row per job that ran in the week and reported tokens (job_usage)
-- Reads:   job_usage
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: job_id, user, account, gpus, alloc_gpu_h, tokens_per_s_per_gpu, model_params, mfu
--
-- A job counts for the week when it ran in it (start before the week's end, and still running
-- or ended in or after the week's start). Its figures are the whole job's (job_usage), not the
-- week's part.

SELECT
    job_id,
    user,
    account,
    gpus,
    alloc_gpu_h,
    tokens_per_s_per_gpu,
    model_params,
    mfu
FROM job_usage
WHERE cluster = $cluster
    AND tokens_per_s_per_gpu IS NOT NULL
    AND epoch(start_ts) < $week_end_e
    AND (end_ts IS NULL OR epoch(end_ts) >= $week_start_e)
ORDER BY alloc_gpu_h DESC, job_id
