-- sample_steps: every GPU sample with its device's number and the device's next sample after it.
--
-- Grain:   one row per owned_samples row that names its GPU (a UUID or an index)
-- Reads:   owned_samples (the samples with their owners), sample_devices (the devices' numbers)
-- Params:  none
-- Returns: device_id, gpu_id, variant_id (sample_devices' numbers of the row's device, physical
--          GPU and key values), mig_instance, ts, job_id, owner_end_e (the end of the owner's
--          allocation, epoch seconds; null while it runs or without an owner), interval_s,
--          gpu_util_pct, busy, sm_active, tensor_active, dram_active, fb_used_mib, power_w,
--          energy_j, nvlink_bps, pcie_bps, lead_ts, lead_energy_j (the next row's in the
--          device's time order), tied (another row of the device has this ts)
--
-- The one sort of the samples (by device, then time) that sql/views/sample_spans.sql starts
-- from: it reads these rows twice (rows alone at their ts, rows sharing it) and once more for
-- the MIG instances at a ts, so the per-day pass (warehouse/partitions.py) holds them once.
-- The key columns (strings) are left out of the rows: the window sorts and carries every
-- column it is given, and variant_id stands for them (sample_spans joins them back).

-- The rows in the columns the spans need, derived ones computed here.
WITH finite AS (
    -- a figure that is no number (NaN, infinite: another tool's file) is unknown, as a null one
    -- is: one NaN would make every sum it reaches NaN, and NaN orders above any idle line.
    -- x - x = 0 holds for every finite x alone (NaN - NaN and inf - inf are NaN): Spark has no
    -- isfinite, and DuckDB folds a range test (abs(x) < inf, even isnan) from a Parquet file's
    -- statistics, which leave NaN out, so a file's NaN passed it.
    -- A figure outside what it can be is unknown too: an activity outside 0-1 (a hair over 1,
    -- rounding, stays), a utilisation outside 0-100 %, a negative memory, power, energy counter
    -- or rate (a busy 1.23 made a job's effective GPU-hours exceed those it held). The bounds
    -- are FLOATs, as the columns are: compared in double precision (Spark's way with a literal)
    -- a stored 1.001 is 1.00100004673, above the bound, which DuckDB kept (float precision)
    SELECT
        g.cluster,
        g.node,
        g.gpu_index,
        g.gpu_uuid,
        g.mig_instance,
        g.model,
        g.ts,
        g.job_id,
        g.owner_end,
        g.interval_s,
        CASE
            WHEN g.gpu_util_pct - g.gpu_util_pct = 0
                AND g.gpu_util_pct BETWEEN 0 AND CAST(100.1 AS FLOAT)
                THEN g.gpu_util_pct
        END AS gpu_util_pct,
        CASE
            WHEN g.engine_active - g.engine_active = 0
                AND g.engine_active BETWEEN 0 AND CAST(1.001 AS FLOAT)
                THEN g.engine_active
        END AS engine_active,
        CASE
            WHEN g.sm_active - g.sm_active = 0
                AND g.sm_active BETWEEN 0 AND CAST(1.001 AS FLOAT)
                THEN g.sm_active
        END AS sm_active,
        CASE
            WHEN g.tensor_active - g.tensor_active = 0
                AND g.tensor_active BETWEEN 0 AND CAST(1.001 AS FLOAT)
                THEN g.tensor_active
        END AS tensor_active,
        CASE
            WHEN g.dram_active - g.dram_active = 0
                AND g.dram_active BETWEEN 0 AND CAST(1.001 AS FLOAT)
                THEN g.dram_active
        END AS dram_active,
        CASE
            WHEN g.fb_used_mib - g.fb_used_mib = 0
                AND g.fb_used_mib >= 0
                THEN g.fb_used_mib
        END AS fb_used_mib,
        CASE
            WHEN g.power_w - g.power_w = 0
                AND g.power_w >= 0
                THEN g.power_w
        END AS power_w,
        CASE
            WHEN g.energy_j - g.energy_j = 0
                AND g.energy_j >= 0
                THEN g.energy_j
        END AS energy_j,
        CASE
            WHEN g.nvlink_tx_bps - g.nvlink_tx_bps = 0
                AND g.nvlink_tx_bps >= 0
                THEN g.nvlink_tx_bps
        END AS nvlink_tx_bps,
        CASE
            WHEN g.nvlink_rx_bps - g.nvlink_rx_bps = 0
                AND g.nvlink_rx_bps >= 0
                THEN g.nvlink_rx_bps
        END AS nvlink_rx_bps,
        CASE
            WHEN g.pcie_tx_bps - g.pcie_tx_bps = 0
                AND g.pcie_tx_bps >= 0
                THEN g.pcie_tx_bps
        END AS pcie_tx_bps,
        CASE
            WHEN g.pcie_rx_bps - g.pcie_rx_bps = 0
                AND g.pcie_rx_bps >= 0
                THEN g.pcie_rx_bps
        END AS pcie_rx_bps
    FROM owned_samples AS g
),
keyed AS (
    SELECT
        d.device_id,
        d.gpu_id,
        d.variant_id,
        d.mig_instance,
        g.ts,
        g.job_id,
        epoch(g.owner_end) AS owner_end_e,
        -- an interval that is no span (NaN, infinite, 0 or less: another tool's file) is none,
        -- as a null one is, and so is one above an hour (no sampling step: milliseconds for
        -- seconds, a trace's 1e8; the last sample's span set the data's end years ahead and a
        -- 1-GPU job held 27,790 GPU-hours) (warehouse/partitions.py says how many the day had)
        CASE
            WHEN g.interval_s - g.interval_s = 0 AND g.interval_s > 0 AND g.interval_s <= 3600
                THEN g.interval_s
        END AS interval_s,
        g.gpu_util_pct,
        -- in double precision: as a float, GPU_UTIL 1 % / 100 falls below the 0.01 idle line
        coalesce(
            CAST(g.engine_active AS DOUBLE),
            CAST(g.sm_active AS DOUBLE),
            CAST(g.gpu_util_pct AS DOUBLE) / 100
        ) AS busy,
        g.sm_active,
        g.tensor_active,
        g.dram_active,
        g.fb_used_mib,
        g.power_w,
        g.energy_j,
        -- null where the GPU reports neither direction: a job's NVLink / PCIe GB is unknown
        -- (null), not 0, when its source lacks those fields (DESIGN §3.1: null, never 0)
        CASE
            WHEN g.nvlink_tx_bps IS NULL AND g.nvlink_rx_bps IS NULL THEN NULL
            ELSE coalesce(g.nvlink_tx_bps, 0) + coalesce(g.nvlink_rx_bps, 0)
        END AS nvlink_bps,
        CASE
            WHEN g.pcie_tx_bps IS NULL AND g.pcie_rx_bps IS NULL THEN NULL
            ELSE coalesce(g.pcie_tx_bps, 0) + coalesce(g.pcie_rx_bps, 0)
        END AS pcie_bps
    FROM finite AS g
    INNER JOIN sample_devices AS d
        ON d.cluster = g.cluster
        AND d.node = g.node
        AND d.gpu_index IS NOT DISTINCT FROM g.gpu_index
        AND d.gpu_uuid IS NOT DISTINCT FROM g.gpu_uuid
        AND d.mig_instance IS NOT DISTINCT FROM g.mig_instance
        AND d.model IS NOT DISTINCT FROM g.model
        -- a sample naming neither its GPU's UUID nor its index has no GPU to count it on
        -- (warehouse/partitions.py says how many the day had)
        AND d.device IS NOT NULL
)
SELECT
    *,
    -- the device's next sample time, past the other rows (sharers, duplicates) at this ts
    lead(ts) OVER device_time AS lead_ts,
    lead(energy_j) OVER device_time AS lead_energy_j,
    coalesce(lead(ts) OVER device_time = ts OR lag(ts) OVER device_time = ts, FALSE) AS tied
FROM keyed
-- rows at one ts in the order sample_spans keeps one of a job's duplicates by (the lowest
-- counter first): the sample before them runs to the reading that stands, whichever row came
-- first in the file (0 → 130 J then 100 → 200 J counted 230 J where the counter rose 200, in
-- one build of a lake and not the next)
WINDOW device_time AS (PARTITION BY device_id ORDER BY ts, energy_j NULLS LAST)
