-- gpu_health_hourly_stored: the rows of sql/detectors/gpu_health_hourly.sql, as the lake keeps them.
--
-- Grain:   one row per (cluster, node, gpu_uuid, gpu_index, hour) with any sample
-- Reads:   gpu_health_hourly (the hours `gpuledger detect` stores a day at a time from the
--          sample files, warehouse/detector_days.py)
-- Params:
--   $since  ignore hours before this time (TIMESTAMP, UTC); an hour is whole: the rules read
--           these rows only for a `since` on the hour (detectors/rules/run.py)
-- Returns: the columns of sql/detectors/gpu_health_hourly.sql, in its order

SELECT
    cluster,
    node,
    gpu_uuid,
    gpu_index,
    model,
    hour,
    samples,
    interval_s,
    thermal_samples,
    hw_slowdown_samples,
    power_brake_samples,
    throttled_samples,
    busy_samples,
    throttled_busy_samples,
    clock_throttled_mean,
    clock_busy_max,
    temp_max,
    sbe_max,
    dbe_min,
    dbe_max,
    remap_pending,
    remap_failure
FROM gpu_health_hourly
WHERE hour >= $since
ORDER BY cluster, node, gpu_index, hour, gpu_uuid
