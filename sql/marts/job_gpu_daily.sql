-- job_gpu_daily: what each job did on each of its GPUs (or MIG instances), per UTC day.
--
-- Grain:   one row per (cluster, job_id, device, mig_instance, date)
-- Reads:   gpu_job_buckets, gpu_models
-- Params:  none
-- Returns: cluster, job_id, device, mig_instance, date, node, gpu_index, gpu_uuid, model, samples,
--          observed_s, active_s, idle_s, effective_s, busy_known_s, util_sum, util_known_s,
--          sm_sum, sm_known_s, tensor_sum, tensor_known_s, dram_sum, dram_known_s, tflops_sum,
--          fb_used_mib_max, energy_j, power_sum, power_known_s, nvlink_bytes, pcie_bytes,
--          shared_s, next_day_s, next_day_active_s, next_day_idle_s, next_day_effective_s,
--          next_day_shared_s
--
-- Samples count on the day of their ts (buckets divide a day, so a bucket lies in one day).
-- next_day_*: the part of observed_s (active_s, idle_s, effective_s, shared_s) that lies past
-- the day's end, where the day's last sample runs into the next day; usage_daily counts it on
-- that day, so no day's observed time exceeds what the job held that day.
-- The *_sum columns are time-weighted (value × span_s); divide by the matching *_known_s.
-- shared_s: the part of observed_s on a shared GPU (the job's split of it, an estimate).

SELECT
    b.cluster,
    b.job_id,
    b.device,
    b.mig_instance,
    b.date,
    min(b.node) AS node,
    min(b.gpu_index) AS gpu_index,
    min(b.gpu_uuid) AS gpu_uuid,
    min(b.model) AS model,
    sum(b.samples) AS samples,
    sum(b.observed_s) AS observed_s,
    sum(b.active_s) AS active_s,
    sum(b.idle_s) AS idle_s,
    sum(b.effective_s) AS effective_s,
    sum(b.busy_known_s) AS busy_known_s,
    sum(b.util_sum) AS util_sum,
    sum(b.util_known_s) AS util_known_s,
    sum(b.sm_sum) AS sm_sum,
    sum(b.sm_known_s) AS sm_known_s,
    sum(b.tensor_sum) AS tensor_sum,
    sum(b.tensor_known_s) AS tensor_known_s,
    sum(b.dram_sum) AS dram_sum,
    sum(b.dram_known_s) AS dram_known_s,
    sum(b.tensor_sum) * any_value(m.peak_bf16_dense_tflops) AS tflops_sum,
    max(b.fb_used_mib_max) AS fb_used_mib_max,
    sum(b.energy_j) AS energy_j,
    sum(b.power_sum) AS power_sum,
    sum(b.power_known_s) AS power_known_s,
    sum(b.nvlink_bytes) AS nvlink_bytes,
    sum(b.pcie_bytes) AS pcie_bytes,
    sum(b.shared_s) AS shared_s,
    sum(b.next_day_s) AS next_day_s,
    sum(CASE WHEN b.carry_active_s > 0 THEN b.next_day_s ELSE 0 END) AS next_day_active_s,
    sum(CASE WHEN b.carry_idle_s > 0 THEN b.next_day_s ELSE 0 END) AS next_day_idle_s,
    sum(coalesce(b.carry_busy, 0) * b.next_day_s) AS next_day_effective_s,
    sum(CASE WHEN b.carry_sharers > 1 THEN b.next_day_s ELSE 0 END) AS next_day_shared_s
FROM (
    -- the bucket's sample that runs past its end (carry_*) runs past midnight too when its end
    -- (last_end_e) lies past the day's: its part there, split among its sharers as its span is
    SELECT
        *,
        coalesce(
            greatest(last_end_e - (epoch(CAST(date AS TIMESTAMP)) + 86400), 0) / carry_sharers, 0
        ) AS next_day_s
    FROM gpu_job_buckets
) AS b
LEFT JOIN gpu_models AS m
    ON m.model = b.model
WHERE b.job_id IS NOT NULL
GROUP BY b.cluster, b.job_id, b.device, b.mig_instance, b.date
