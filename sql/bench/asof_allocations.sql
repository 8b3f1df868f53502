-- asof_allocations: the allocations the dataframe baselines of `gpuledger bench` join samples to.
--
-- Grain:   one row per job_gpus row with a GPU UUID
-- Reads:   job_gpus
-- Params:  none
-- Returns: gpu (the same integer per UUID as asof_samples), job_id, start_ts, end_ts (epoch ms)

SELECT
    hash(gpu_uuid) AS gpu,
    job_id,
    epoch_ms(start_ts) AS start_ts,
    epoch_ms(end_ts) AS end_ts
FROM job_gpus
WHERE gpu_uuid IS NOT NULL
