-- gpu_health_hourly: one GPU's health signals per hour, the input of the failing-GPU model.
--
-- Grain:   one row per (cluster, gpu_uuid, hour) with samples
-- Reads:   gpu_samples, gpu_events
-- Params:  none
-- Returns: cluster, gpu_uuid, node, hour, samples, sbe_max, dbe_max, remap_pending,
--          remap_failure, temp_mean, temp_max, throttle_frac, minor_xids
--
-- hour is the start of the hour; everything in a row was known by hour + 1 h. The corrected
-- (single-bit) ECC count is a counter since the driver load, so its trend is what matters.
-- throttle_frac is the share of samples whose clock-event reasons carry HW slowdown (0x8) or
-- thermal slowdown (0x20, 0x40). minor_xids counts XID events that are not the failures the
-- model predicts (48, 79, 94, 95): application errors and GSP errors alike. On a MIG GPU the
-- device-level fields repeat on every instance, so maxima and means are those of the GPU and
-- samples counts sample times, not rows.

WITH hourly AS (
    SELECT
        cluster,
        gpu_uuid,
        to_timestamp(floor(epoch(ts) / 3600) * 3600) AS hour,
        any_value(node) AS node,
        count(DISTINCT ts) AS samples,
        max(ecc_sbe_volatile) AS sbe_max,
        max(ecc_dbe_volatile) AS dbe_max,
        coalesce(bool_or(remap_pending), false) AS remap_pending,
        coalesce(bool_or(remap_failure), false) AS remap_failure,
        avg(temp_c) AS temp_mean,
        max(temp_c) AS temp_max,
        avg(CASE WHEN (clock_event_reasons & 104) <> 0 THEN 1.0 ELSE 0.0 END) AS throttle_frac
    FROM gpu_samples
    WHERE gpu_uuid IS NOT NULL
    GROUP BY cluster, gpu_uuid, hour
),
xids AS (
    SELECT
        cluster,
        gpu_uuid,
        to_timestamp(floor(epoch(ts) / 3600) * 3600) AS hour,
        count(*) AS minor_xids
    FROM gpu_events
    WHERE kind = 'xid' AND code NOT IN (48, 79, 94, 95) AND gpu_uuid IS NOT NULL
    GROUP BY cluster, gpu_uuid, hour
)
SELECT
    h.cluster,
    h.gpu_uuid,
    h.node,
    h.hour,
    h.samples,
    h.sbe_max,
    h.dbe_max,
    h.remap_pending,
    h.remap_failure,
    h.temp_mean,
    h.temp_max,
    h.throttle_frac,
    coalesce(x.minor_xids, 0) AS minor_xids
FROM hourly AS h
LEFT JOIN xids AS x
    ON x.cluster = h.cluster AND x.gpu_uuid = h.gpu_uuid AND x.hour = h.hour
ORDER BY h.cluster, h.gpu_uuid, h.hour
