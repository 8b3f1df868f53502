-- bottleneck_devices_stored: the rows of sql/detectors/bottleneck_devices.sql, as the lake keeps them.
--
-- Grain:   one row per (cluster, job_id, device, date): a GPU of a job on one day
-- Reads:   bottleneck_device_days (what `gpuledger detect` keeps a day at a time from the sample
--          files and the allocations, warehouse/detector_days.py)
-- Params:  none
-- Returns: the columns of sql/detectors/bottleneck_devices.sql, in its order

SELECT
    cluster,
    job_id,
    device,
    first_ts,
    last_ts,
    samples,
    w,
    busy_w,
    busy_known,
    util_w,
    util_known,
    sm_w,
    sm_known,
    tensor_w,
    tensor_known,
    dram_w,
    dram_known,
    nvlink_w,
    nvlink_known,
    pcie_w,
    pcie_known,
    idle_w,
    gap_w,
    burst_w,
    first_busy,
    last_busy,
    bursts
FROM bottleneck_device_days
