-- bottleneck_signals: per job, the DCGM counters that tell what limited it.
--
-- Grain:   one row per (cluster, job_id) with owned samples
-- Reads:   owned_samples (the samples with their owners by the allocation rule)
-- Params:
--   $job_ids      list of job ids to look at (VARCHAR[]), or NULL for every job
--   $idle_below   a sample is idle when busy < this (DESIGN §4 default 0.01)
--   $gap_below    a sample is in a gap (the GPU waits for input) when busy < this, e.g. 0.1
--   $burst_above  a sample is in a burst when busy >= this, e.g. 0.25
-- Returns: cluster, job_id, gpus_observed, samples, observed_h, busy_mean, gpu_util_pct_mean,
--          sm_active_mean, tensor_active_mean, dram_active_mean, nvlink_gbps_mean,
--          pcie_gbps_mean, idle_frac, gap_frac, burst_frac, bursts_per_h
--
-- Each sample weighs its interval_s. busy = first non-null of engine_active, sm_active,
-- gpu_util_pct / 100 (DESIGN §4). Fractions are of the time whose busy is known. NVLink and
-- PCIe rates are per GPU (tx + rx, GB/s), over the samples that report them. A burst starts
-- where a GPU goes from a gap sample straight to a burst sample; bursts_per_h counts them per
-- hour of one GPU's observed time, so a job that idles once and then works has few, and one
-- that waits for every batch has many.

WITH job_samples AS (
    SELECT
        cluster,
        job_id,
        coalesce(gpu_uuid, node || '/' || CAST(gpu_index AS VARCHAR))
            || '#' || coalesce(CAST(mig_instance AS VARCHAR), '') AS device,
        ts,
        CAST(interval_s AS DOUBLE) AS w,
        coalesce(engine_active, sm_active, gpu_util_pct / 100.0) AS busy,
        gpu_util_pct,
        sm_active,
        tensor_active,
        dram_active,
        CASE
            WHEN nvlink_tx_bps IS NULL AND nvlink_rx_bps IS NULL THEN NULL
            ELSE coalesce(nvlink_tx_bps, 0) + coalesce(nvlink_rx_bps, 0)
        END AS nvlink_bps,
        CASE
            WHEN pcie_tx_bps IS NULL AND pcie_rx_bps IS NULL THEN NULL
            ELSE coalesce(pcie_tx_bps, 0) + coalesce(pcie_rx_bps, 0)
        END AS pcie_bps
    FROM owned_samples
    WHERE job_id IS NOT NULL
        AND ($job_ids IS NULL OR list_contains($job_ids, job_id))
),
stepped AS (
    SELECT
        *,
        lag(busy) OVER (PARTITION BY cluster, job_id, device ORDER BY ts) AS prev_busy
    FROM job_samples
)
SELECT
    cluster,
    job_id,
    count(DISTINCT device) AS gpus_observed,
    count(*) AS samples,
    sum(w) / 3600.0 AS observed_h,
    sum(busy * w) / nullif(sum(w) FILTER (WHERE busy IS NOT NULL), 0) AS busy_mean,
    sum(gpu_util_pct * w) / nullif(sum(w) FILTER (WHERE gpu_util_pct IS NOT NULL), 0)
        AS gpu_util_pct_mean,
    sum(sm_active * w) / nullif(sum(w) FILTER (WHERE sm_active IS NOT NULL), 0) AS sm_active_mean,
    sum(tensor_active * w) / nullif(sum(w) FILTER (WHERE tensor_active IS NOT NULL), 0)
        AS tensor_active_mean,
    sum(dram_active * w) / nullif(sum(w) FILTER (WHERE dram_active IS NOT NULL), 0)
        AS dram_active_mean,
    sum(nvlink_bps * w) / nullif(sum(w) FILTER (WHERE nvlink_bps IS NOT NULL), 0) / 1e9
        AS nvlink_gbps_mean,
    sum(pcie_bps * w) / nullif(sum(w) FILTER (WHERE pcie_bps IS NOT NULL), 0) / 1e9
        AS pcie_gbps_mean,
    coalesce(sum(w) FILTER (WHERE busy < $idle_below), 0)
        / nullif(sum(w) FILTER (WHERE busy IS NOT NULL), 0) AS idle_frac,
    coalesce(sum(w) FILTER (WHERE busy < $gap_below), 0)
        / nullif(sum(w) FILTER (WHERE busy IS NOT NULL), 0) AS gap_frac,
    coalesce(sum(w) FILTER (WHERE busy >= $burst_above), 0)
        / nullif(sum(w) FILTER (WHERE busy IS NOT NULL), 0) AS burst_frac,
    count(*) FILTER (WHERE prev_busy < $gap_below AND busy >= $burst_above)
        / nullif(sum(w) FILTER (WHERE busy IS NOT NULL) / 3600.0, 0) AS bursts_per_h
FROM stepped
GROUP BY cluster, job_id
ORDER BY cluster, job_id
