-- partition_samples: the samples one day's partition of the sample-level marts is built from,
-- each with its owner, in the columns sql/views/sample_spans.sql reads.
--
-- Grain:   one row per sample of day_owned, plus one per device from next_day_head
-- Reads:   day_owned (the day's samples with their owners: sql/views/owned_samples.sql over
--          them), next_day_head
-- Params:  none
-- Returns: cluster, node, gpu_index, gpu_uuid, mig_instance, model, ts, job_id, interval_s,
--          gpu_util_pct, engine_active, sm_active, tensor_active, dram_active, fb_used_mib,
--          power_w, energy_j, nvlink_tx_bps, nvlink_rx_bps, pcie_tx_bps, pcie_rx_bps
--
-- The head rows only give the day's last samples their successor; they carry no owner, and
-- the rows they produce fall on the next day and are dropped by the builder
-- (warehouse/partitions.py). Only the columns the marts read are held: the engine keeps this
-- table in memory (spilling past its limit), and the samples' other columns are half of them.

SELECT
    cluster,
    node,
    gpu_index,
    gpu_uuid,
    mig_instance,
    model,
    ts,
    job_id,
    interval_s,
    gpu_util_pct,
    engine_active,
    sm_active,
    tensor_active,
    dram_active,
    fb_used_mib,
    power_w,
    energy_j,
    nvlink_tx_bps,
    nvlink_rx_bps,
    pcie_tx_bps,
    pcie_rx_bps
FROM day_owned
UNION ALL BY NAME
SELECT * FROM next_day_head
