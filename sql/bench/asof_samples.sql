-- asof_samples: the sample columns the dataframe baselines of `gpuledger bench` attribute.
--
-- Grain:   one row per gpu_samples row with a GPU UUID
-- Reads:   gpu_samples
-- Params:  none
-- Returns: gpu (an integer per UUID), ts (epoch ms), gpu_util_pct, power_w
--
-- GPUs become integers (a hash of the UUID) so the baselines join on a number, as they would
-- after a real data scientist's categorical encoding; time is epoch milliseconds.

SELECT
    hash(gpu_uuid) AS gpu,
    epoch_ms(ts) AS ts,
    gpu_util_pct,
    power_w
FROM gpu_samples
WHERE gpu_uuid IS NOT NULL
