-- bottleneck_devices: per job and GPU, the partial sums the bottleneck signals are made of.
--
-- Grain:   one row per (cluster, job_id, device) with owned samples
-- Reads:   owned_samples (the samples with their owners by the allocation rule)
-- Params:
--   $idle_below   a sample is idle when busy < this (DESIGN §4 default 0.01)
--   $gap_below    a sample is in a gap (the GPU waits for input) when busy < this, e.g. 0.1
--   $burst_above  a sample is in a burst when busy >= this, e.g. 0.25
-- Returns: cluster, job_id, device, first_ts, last_ts, samples, w, busy_w, busy_known, util_w,
--          util_known, sm_w, sm_known, tensor_w, tensor_known, dram_w, dram_known, nvlink_w,
--          nvlink_known, pcie_w, pcie_known, idle_w, gap_w, burst_w, first_busy, last_busy,
--          bursts
--
-- Each sample weighs its interval_s (w), split evenly among the jobs its GPU's rows at its time
-- go to (owned_samples' `owners`: a GPU several jobs' allocations share, one row per sharer or
-- one row they all claim), as the marts split the GPU's time (sql/views/sample_spans.sql), so
-- it counts once, not once per job. (A row landed twice still counts twice here, where the
-- marts count it once; the means are the same.) busy = first non-null of engine_active, sm_active,
-- gpu_util_pct / 100 (DESIGN §4). A burst starts where a GPU goes from a gap sample straight to
-- a burst sample: `bursts` counts those between this row's samples; first_busy and last_busy
-- (its first and last samples' busy, null included) let sql/detectors/bottleneck_signals.sql
-- count the one between two rows of a GPU (the days `gpuledger detect` keeps them by:
-- warehouse/detector_days.py). Each GPU's busy values in time order are one list, so finding
-- each sample's predecessor sorts one narrow column per GPU instead of every column of every
-- sample (a window over the samples cost ~40 % of the query on a large lake). Samples of one
-- time on one device (GPUs naming neither UUID nor index, which cannot be told apart, or a
-- sample landed twice) are in a fixed order, the busiest first, so the figures do not hang on
-- the order the rows were read: a gap→burst step is then counted from one time to the next.

-- A figure that is no number or outside what it can be is unknown, as
-- sql/views/sample_steps.sql has it for the marts (x - x = 0: finite; an activity 0-1, a hair
-- over 1 kept; a utilisation 0-100 %; a rate not negative).
WITH known AS (
    SELECT
        cluster,
        job_id,
        gpu_uuid,
        node,
        gpu_index,
        mig_instance,
        ts,
        interval_s,
        owners,
        CASE
            WHEN gpu_util_pct - gpu_util_pct = 0 AND gpu_util_pct BETWEEN 0 AND 100.1
                THEN gpu_util_pct
        END AS gpu_util_pct,
        CASE
            WHEN engine_active - engine_active = 0 AND engine_active BETWEEN 0 AND 1.001
                THEN engine_active
        END AS engine_active,
        CASE
            WHEN sm_active - sm_active = 0 AND sm_active BETWEEN 0 AND 1.001
                THEN sm_active
        END AS sm_active,
        CASE
            WHEN tensor_active - tensor_active = 0 AND tensor_active BETWEEN 0 AND 1.001
                THEN tensor_active
        END AS tensor_active,
        CASE
            WHEN dram_active - dram_active = 0 AND dram_active BETWEEN 0 AND 1.001
                THEN dram_active
        END AS dram_active,
        CASE WHEN nvlink_tx_bps - nvlink_tx_bps = 0 AND nvlink_tx_bps >= 0 THEN nvlink_tx_bps END
            AS nvlink_tx_bps,
        CASE WHEN nvlink_rx_bps - nvlink_rx_bps = 0 AND nvlink_rx_bps >= 0 THEN nvlink_rx_bps END
            AS nvlink_rx_bps,
        CASE WHEN pcie_tx_bps - pcie_tx_bps = 0 AND pcie_tx_bps >= 0 THEN pcie_tx_bps END
            AS pcie_tx_bps,
        CASE WHEN pcie_rx_bps - pcie_rx_bps = 0 AND pcie_rx_bps >= 0 THEN pcie_rx_bps END
            AS pcie_rx_bps
    FROM owned_samples
    WHERE job_id IS NOT NULL
),
job_samples AS (
    SELECT
        cluster,
        job_id,
        coalesce(gpu_uuid, node || '/' || CAST(gpu_index AS VARCHAR))
            || '#' || coalesce(CAST(mig_instance AS VARCHAR), '') AS device,
        ts,
        -- an interval that is no span (NaN, infinite, 0 or less, above an hour) weighs
        -- nothing, as a null one (sql/views/sample_steps.sql)
        CASE
            WHEN interval_s - interval_s = 0 AND interval_s > 0 AND interval_s <= 3600
                THEN CAST(interval_s AS DOUBLE) / owners
        END AS w,
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
    FROM known
),
-- per GPU of a job: its partial sums, and its busy values in time order (for the bursts)
per_device AS (
    SELECT
        cluster,
        job_id,
        device,
        min(ts) AS first_ts,
        max(ts) AS last_ts,
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
        list(busy ORDER BY ts, busy DESC NULLS LAST) AS busy_seq
    FROM job_samples
    GROUP BY cluster, job_id, device
)
SELECT
    * EXCLUDE (busy_seq),
    busy_seq[1] AS first_busy,
    busy_seq[len(busy_seq)] AS last_busy,
    -- each value paired with the next (DuckDB's slices are inclusive: [:-2] drops the last)
    len(list_filter(
        list_zip(busy_seq[:-2], busy_seq[2:]),
        lambda p: p[1] < $gap_below AND p[2] >= $burst_above
    )) AS bursts
FROM per_device
