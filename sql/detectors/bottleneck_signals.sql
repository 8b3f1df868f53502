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
--
-- Summed per GPU first, then per job: each GPU's busy values, in time order, are one list, so
-- finding each sample's predecessor sorts one narrow column per GPU instead of every
-- column of every sample (a window over the samples cost ~40 % of this query on a large lake).

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
-- per GPU of a job: its partial sums, and its busy values in time order (for the bursts)
per_device AS (
    SELECT
        cluster,
        job_id,
        device,
        count(*) AS samples,
        sum(w) AS w,
        sum(busy * w) AS busy_w,
        sum(w) FILTER (WHERE busy IS NOT NULL) AS busy_known,
        sum(gpu_util_pct * w) AS util_w,
        sum(w) FILTER (WHERE gpu_util_pct IS NOT NULL) AS util_known,
        sum(sm_active * w) AS sm_w,
        sum(w) FILTER (WHERE sm_active IS NOT NULL) AS sm_known,
        sum(tensor_active * w) AS tensor_w,
        sum(w) FILTER (WHERE tensor_active IS NOT NULL) AS tensor_known,
        sum(dram_active * w) AS dram_w,
        sum(w) FILTER (WHERE dram_active IS NOT NULL) AS dram_known,
        sum(nvlink_bps * w) AS nvlink_w,
        sum(w) FILTER (WHERE nvlink_bps IS NOT NULL) AS nvlink_known,
        sum(pcie_bps * w) AS pcie_w,
        sum(w) FILTER (WHERE pcie_bps IS NOT NULL) AS pcie_known,
        sum(w) FILTER (WHERE busy < $idle_below) AS idle_w,
        sum(w) FILTER (WHERE busy < $gap_below) AS gap_w,
        sum(w) FILTER (WHERE busy >= $burst_above) AS burst_w,
        list(busy ORDER BY ts) AS busy_seq
    FROM job_samples
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
    sum(
        -- each value paired with the next (DuckDB's slices are inclusive: [:-2] drops the last)
        len(list_filter(
            list_zip(busy_seq[:-2], busy_seq[2:]),
            lambda p: p[1] < $gap_below AND p[2] >= $burst_above
        ))
    ) / nullif(sum(busy_known) / 3600.0, 0) AS bursts_per_h
FROM per_device
GROUP BY cluster, job_id
ORDER BY cluster, job_id
