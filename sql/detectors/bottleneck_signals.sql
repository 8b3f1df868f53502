-- bottleneck_signals: per job, the DCGM counters that tell what limited it.
--
-- Grain:   one row per (cluster, job_id) with owned samples
-- Reads:   bottleneck_devices (per job and GPU, the partial sums of its samples: the rows of
--          sql/detectors/bottleneck_devices.sql over the owned samples, or those `gpuledger
--          detect` keeps a day at a time, several rows a GPU: warehouse/detector_days.py)
-- Params:
--   $job_ids      list of job ids to look at (VARCHAR[]), or NULL for every job
--   $gap_below    a sample is in a gap (the GPU waits for input) when busy < this, e.g. 0.1
--   $burst_above  a sample is in a burst when busy >= this, e.g. 0.25
--                 (both as bottleneck_devices' rows were computed with)
-- Returns: cluster, job_id, gpus_observed, samples, observed_h, busy_mean, gpu_util_pct_mean,
--          sm_active_mean, tensor_active_mean, dram_active_mean, nvlink_gbps_mean,
--          pcie_gbps_mean, idle_frac, gap_frac, burst_frac, bursts_per_h
--
-- Each sample weighs its interval_s. busy = first non-null of engine_active, sm_active,
-- gpu_util_pct / 100 (DESIGN §4). Fractions are of the time whose busy is known. NVLink and
-- PCIe rates are per GPU (tx + rx, GB/s), over the samples that report them. A burst starts
-- where a GPU goes from a gap sample straight to a burst sample; bursts_per_h counts them per
-- hour of one GPU's observed time, so a job that idles once and then works has few, and one
-- that waits for every batch has many. Where a GPU of a job has several rows (its days), the
-- sums add up, and a burst starting at the first sample of a row after a gap at the last sample
-- of the row before it counts too: the job's figures are those of all its samples at once.

WITH parts AS (
    SELECT
        *,
        lag(last_busy) OVER (PARTITION BY cluster, job_id, device ORDER BY first_ts)
            AS busy_before
    FROM bottleneck_devices
    WHERE $job_ids IS NULL OR list_contains($job_ids, job_id)
),
per_device AS (
    SELECT
        cluster,
        job_id,
        device,
        sum(samples) AS samples,
        sum(w) AS w,
        sum(busy_w) AS busy_w,
        sum(busy_known) AS busy_known,
        sum(util_w) AS util_w,
        sum(util_known) AS util_known,
        sum(sm_w) AS sm_w,
        sum(sm_known) AS sm_known,
        sum(tensor_w) AS tensor_w,
        sum(tensor_known) AS tensor_known,
        sum(dram_w) AS dram_w,
        sum(dram_known) AS dram_known,
        sum(nvlink_w) AS nvlink_w,
        sum(nvlink_known) AS nvlink_known,
        sum(pcie_w) AS pcie_w,
        sum(pcie_known) AS pcie_known,
        sum(idle_w) AS idle_w,
        sum(gap_w) AS gap_w,
        sum(burst_w) AS burst_w,
        sum(bursts)
            + count(*) FILTER (WHERE busy_before < $gap_below AND first_busy >= $burst_above)
            AS bursts
    FROM parts
    GROUP BY cluster, job_id, device
)
SELECT
    cluster,
    job_id,
    count(device) AS gpus_observed,  -- a sample with neither UUID nor index names no GPU
    CAST(sum(samples) AS BIGINT) AS samples,
    sum(w) / 3600.0 AS observed_h,
    sum(busy_w) / nullif(sum(busy_known), 0) AS busy_mean,
    sum(util_w) / nullif(sum(util_known), 0) AS gpu_util_pct_mean,
    sum(sm_w) / nullif(sum(sm_known), 0) AS sm_active_mean,
    sum(tensor_w) / nullif(sum(tensor_known), 0) AS tensor_active_mean,
    sum(dram_w) / nullif(sum(dram_known), 0) AS dram_active_mean,
    sum(nvlink_w) / nullif(sum(nvlink_known), 0) / 1e9 AS nvlink_gbps_mean,
    sum(pcie_w) / nullif(sum(pcie_known), 0) / 1e9 AS pcie_gbps_mean,
    coalesce(sum(idle_w), 0) / nullif(sum(busy_known), 0) AS idle_frac,
    coalesce(sum(gap_w), 0) / nullif(sum(busy_known), 0) AS gap_frac,
    coalesce(sum(burst_w), 0) / nullif(sum(busy_known), 0) AS burst_frac,
    sum(bursts) / nullif(sum(busy_known) / 3600.0, 0) AS bursts_per_h
FROM per_device
GROUP BY cluster, job_id
ORDER BY cluster, job_id
