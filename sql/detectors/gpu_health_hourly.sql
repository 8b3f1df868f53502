-- gpu_health_hourly: per GPU and hour, throttling, ECC and row-remap state from the samples.
--
-- Grain:   one row per (cluster, node, gpu_uuid, gpu_index, hour) with any sample
-- Reads:   gpu_samples
-- Params:
--   $since  ignore samples before this time (TIMESTAMP, UTC)
-- Returns: cluster, node, gpu_uuid, gpu_index, model, hour, samples, interval_s,
--          thermal_samples, hw_slowdown_samples, power_brake_samples, busy_samples,
--          throttled_busy_samples,
--          clock_throttled_mean, clock_busy_max, temp_max, sbe_max, dbe_min, dbe_max,
--          remap_pending, remap_failure
--
-- clock_event_reasons bits (NVML nvmlClocksEventReason*, reference/dcgm.md): 0x20 SW thermal,
-- 0x40 HW thermal, 0x8 HW slowdown, 0x80 HW power brake; 0x1 (idle) and 0x4 (SW power cap, normal
-- at full load) are not health signals. MIG instances repeat device fields, so a GPU is keyed
-- by its UUID and each sample time counts once.

WITH device_samples AS (
    -- MIG instances repeat the device's fields: one row per GPU and sample time
    SELECT
        cluster,
        node,
        gpu_uuid,
        gpu_index,
        ts,
        any_value(model) AS model,
        max(interval_s) AS interval_s,
        bit_or(clock_event_reasons) AS reasons,
        max(gpu_util_pct) AS gpu_util_pct,
        max(sm_clock_mhz) AS sm_clock_mhz,
        max(temp_c) AS temp_c,
        max(ecc_sbe_volatile) AS sbe,
        max(ecc_dbe_volatile) AS dbe,
        bool_or(remap_pending) AS remap_pending,
        bool_or(remap_failure) AS remap_failure
    FROM gpu_samples
    WHERE ts >= $since
    GROUP BY cluster, node, gpu_uuid, gpu_index, ts
)
SELECT
    cluster,
    node,
    gpu_uuid,
    gpu_index,
    any_value(model) AS model,
    to_timestamp(floor(epoch(ts) / 3600) * 3600) AS hour,
    count(*) AS samples,
    max(interval_s) AS interval_s,
    count(*) FILTER (WHERE (reasons & 96) <> 0) AS thermal_samples,
    count(*) FILTER (WHERE (reasons & 8) <> 0) AS hw_slowdown_samples,
    count(*) FILTER (WHERE (reasons & 128) <> 0) AS power_brake_samples,
    count(*) FILTER (WHERE gpu_util_pct > 0) AS busy_samples,
    count(*) FILTER (WHERE (reasons & 232) <> 0 AND gpu_util_pct > 0) AS throttled_busy_samples,
    avg(sm_clock_mhz) FILTER (WHERE (reasons & 232) <> 0 AND gpu_util_pct > 0)
        AS clock_throttled_mean,
    max(sm_clock_mhz) FILTER (WHERE gpu_util_pct > 0) AS clock_busy_max,
    max(temp_c) AS temp_max,
    max(sbe) AS sbe_max,
    min(dbe) AS dbe_min,
    max(dbe) AS dbe_max,
    coalesce(bool_or(remap_pending), false) AS remap_pending,
    coalesce(bool_or(remap_failure), false) AS remap_failure
FROM device_samples
GROUP BY cluster, node, gpu_uuid, gpu_index, floor(epoch(ts) / 3600)
ORDER BY cluster, node, gpu_index, hour
