-- job_gpu_activity: what one job did on each of its GPUs (or MIG instances).
--
-- Grain:   one row per (device, mig_instance) of the job
-- Reads:   job_gpu_daily, gpu_models
-- Params:
--   $cluster  the job's cluster
--   $job_id   the job id
-- Returns: device, mig_instance, node, gpu_index, gpu_uuid, model, fb_total_mib, observed_h,
--          active_h, idle_h, busy_mean, gpu_util_pct_mean, sm_active_mean, tensor_active_mean,
--          dram_active_mean, fb_used_mib_max, power_w_mean, energy_kwh
--
-- Means are time-weighted over the samples that carry the field (DESIGN §4).

SELECT
    d.device,
    d.mig_instance,
    min(d.node) AS node,
    min(d.gpu_index) AS gpu_index,
    min(d.gpu_uuid) AS gpu_uuid,
    min(d.model) AS model,
    max(m.fb_total_mib) AS fb_total_mib,
    sum(d.observed_s) / 3600.0 AS observed_h,
    sum(d.active_s) / 3600.0 AS active_h,
    sum(d.idle_s) / 3600.0 AS idle_h,
    sum(d.effective_s) / nullif(sum(d.busy_known_s), 0) AS busy_mean,
    sum(d.util_sum) / nullif(sum(d.util_known_s), 0) AS gpu_util_pct_mean,
    sum(d.sm_sum) / nullif(sum(d.sm_known_s), 0) AS sm_active_mean,
    sum(d.tensor_sum) / nullif(sum(d.tensor_known_s), 0) AS tensor_active_mean,
    sum(d.dram_sum) / nullif(sum(d.dram_known_s), 0) AS dram_active_mean,
    max(d.fb_used_mib_max) AS fb_used_mib_max,
    sum(d.power_sum) / nullif(sum(d.power_known_s), 0) AS power_w_mean,
    sum(d.energy_j) / 3600000.0 AS energy_kwh
FROM job_gpu_daily AS d
LEFT JOIN gpu_models AS m
    ON m.model = d.model
WHERE d.cluster = $cluster AND d.job_id = $job_id
GROUP BY d.device, d.mig_instance
ORDER BY node, gpu_index, d.device, d.mig_instance
