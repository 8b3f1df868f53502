-- sample_steps: every GPU sample with its device's number and the device's next sample after it.
--
-- Grain:   one row per owned_samples row
-- Reads:   unowned_samples (the devices: owners do not change them, and reading them there
--          spares the owner join), owned_samples (the samples with their owners)
-- Params:  none
-- Returns: device_id, cluster, gpu_uuid, mig_instance, node, gpu_index, model, ts, job_id,
--          interval_s, gpu_util_pct, busy, sm_active, tensor_active, dram_active, fb_used_mib,
--          power_w, energy_j, nvlink_bps, pcie_bps, lead_ts, lead_energy_j (the next row's in
--          the device's time order), tied (another row of the device has this ts)
--
-- The one sort of the samples (by device, then time) that sql/views/sample_spans.sql starts
-- from: it reads these rows twice (rows alone at their ts, rows sharing it) and once more for
-- the MIG instances at a ts, so the per-day pass (warehouse/partitions.py) holds them once.

WITH devices AS (
    -- The device is the UUID, else node and index. Numbering the devices first lets the windows
    -- partition on one integer and leave the key columns (strings) out of what they sort; the
    -- windows carry them along instead. (Joined back after the windows, the rows were the side
    -- DuckDB built its hash table on: the devices' estimate is the samples' count.)
    SELECT
        cluster,
        gpu_uuid,
        device_node,
        device_index,
        mig_instance,
        -- ordered: Spark numbers rows only in an ordered window
        row_number() OVER (
            ORDER BY cluster, gpu_uuid, device_node, device_index, mig_instance
        ) AS device_id
    FROM (
        SELECT DISTINCT
            cluster,
            gpu_uuid,
            CASE WHEN gpu_uuid IS NULL THEN node END AS device_node,
            CASE WHEN gpu_uuid IS NULL THEN gpu_index END AS device_index,
            mig_instance
        FROM unowned_samples
    ) AS keys
),
-- The rows in the columns the spans need, derived ones computed here: the window sorts and
-- carries every column it is given, and holding fewer makes it cheaper.
keyed AS (
    SELECT
        d.device_id,
        g.cluster,
        g.gpu_uuid,
        g.mig_instance,
        g.node,
        g.gpu_index,
        g.model,
        g.ts,
        g.job_id,
        g.interval_s,
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
    FROM owned_samples AS g
    INNER JOIN devices AS d
        ON d.cluster = g.cluster
        AND d.gpu_uuid IS NOT DISTINCT FROM g.gpu_uuid
        AND d.device_node IS NOT DISTINCT FROM (CASE WHEN g.gpu_uuid IS NULL THEN g.node END)
        AND d.device_index IS NOT DISTINCT FROM (CASE WHEN g.gpu_uuid IS NULL THEN g.gpu_index END)
        AND d.mig_instance IS NOT DISTINCT FROM g.mig_instance
)
SELECT
    *,
    -- the device's next sample time, past the other rows (sharers, duplicates) at this ts
    lead(ts) OVER device_time AS lead_ts,
    lead(energy_j) OVER device_time AS lead_energy_j,
    coalesce(lead(ts) OVER device_time = ts OR lag(ts) OVER device_time = ts, FALSE) AS tied
FROM keyed
WINDOW device_time AS (PARTITION BY device_id ORDER BY ts)
