-- next_day_head: the first sample of each device on the day after a partition being built.
--
-- Grain:   one row per (cluster, gpu_uuid, node, gpu_index, mig_instance) of next_day_samples
-- Reads:   next_day_samples (the gpu_samples files of the following UTC day)
-- Params:  none
-- Returns: cluster, node, gpu_index, gpu_uuid, mig_instance, ts, energy_j
--
-- The last sample of a device on day D stands for the time until the device's next sample
-- (DESIGN §4), which lies on day D + 1. Building day D reads only these rows of D + 1 (one per
-- device, an aggregate rather than a sort), so day D's result equals the one over all history.

SELECT
    cluster,
    node,
    gpu_index,
    gpu_uuid,
    mig_instance,
    min(ts) AS ts,
    -- (a counter that is no number is unknown: sql/views/sample_steps.sql)
    arg_min(
        CASE WHEN energy_j - energy_j = 0 THEN energy_j END, ts
    ) AS energy_j
FROM next_day_samples
GROUP BY cluster, gpu_uuid, node, gpu_index, mig_instance
