-- gpu_health_hourly: per GPU and hour, throttling, ECC and row-remap state from the samples.
--
-- Grain:   one row per (cluster, node, gpu_uuid, gpu_index, hour) with any sample
-- Reads:   gpu_samples
-- Params:
--   $since  ignore samples before this time (TIMESTAMP, UTC)
-- Returns: cluster, node, gpu_uuid, gpu_index, model, hour, samples, interval_s,
--          thermal_samples, hw_slowdown_samples, power_brake_samples, throttled_samples
--          (carrying any of the three, each sample once), busy_samples, throttled_busy_samples,
--          clock_throttled_mean, clock_busy_max, temp_max, sbe_max, dbe_min, dbe_max,
--          remap_pending, remap_failure
--
-- clock_event_reasons bits (NVML nvmlClocksEventReason*, reference/dcgm.md): 0x20 SW thermal,
-- 0x40 HW thermal, 0x8 HW slowdown, 0x80 HW power brake; 0x1 (idle) and 0x4 (SW power cap, normal
-- at full load) are not health signals. A GPU is keyed by (cluster, node, UUID, index); MIG
-- instances repeat the device's fields, so each sample time of a GPU counts once.
--
-- Each GPU (and each model it reported) is numbered first, as the per-day pass numbers devices
-- (sql/views/sample_devices.sql): merging the rows of each GPU and sample time is a hash table
-- with one entry per sample, which costs far less keyed by integers than by the key's strings
-- (20.5 M samples: 48 -> 16-18 s).

WITH variants AS (
    -- each GPU's key values and each model it reported: a few rows per GPU
    SELECT DISTINCT cluster, node, gpu_uuid, gpu_index, model
    FROM gpu_samples
    WHERE ts >= $since
),
numbered AS (
    SELECT
        *,
        -- a GPU's variants with a model first: the least of its rows' numbers names a model
        -- whenever one of them does
        row_number() OVER (
            ORDER BY cluster, node, gpu_uuid, gpu_index, model NULLS LAST
        ) AS variant_id,
        dense_rank() OVER (ORDER BY cluster, node, gpu_uuid, gpu_index) AS gpu_id
    FROM variants
),
device_samples AS (
    -- MIG instances repeat the device's fields: one row per GPU and sample time
    SELECT
        v.gpu_id,
        s.ts,
        min(v.variant_id) AS variant_id,
        -- (an interval that is no sampling step stands for no time: sql/views/sample_steps.sql)
        max(
            CASE
                WHEN s.interval_s - s.interval_s = 0 AND s.interval_s > 0 AND s.interval_s <= 3600
                    THEN s.interval_s
            END
        ) AS interval_s,
        bit_or(s.clock_event_reasons) AS reasons,
        max(s.gpu_util_pct) AS gpu_util_pct,
        max(s.sm_clock_mhz) AS sm_clock_mhz,
        max(s.temp_c) AS temp_c,
        max(s.ecc_sbe_volatile) AS sbe,
        max(s.ecc_dbe_volatile) AS dbe,
        bool_or(s.remap_pending) AS remap_pending,
        bool_or(s.remap_failure) AS remap_failure
    FROM gpu_samples AS s
    INNER JOIN numbered AS v
        ON v.cluster = s.cluster
        AND v.node = s.node
        AND v.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid
        AND v.gpu_index IS NOT DISTINCT FROM s.gpu_index
        AND v.model IS NOT DISTINCT FROM s.model
    WHERE s.ts >= $since
    GROUP BY v.gpu_id, s.ts
),
hourly AS (
    SELECT
        gpu_id,
        min(variant_id) AS variant_id,
        to_timestamp(floor(epoch(ts) / 3600) * 3600) AS hour,
        count(*) AS samples,
        max(interval_s) AS interval_s,
        count(*) FILTER (WHERE (reasons & 96) <> 0) AS thermal_samples,
        count(*) FILTER (WHERE (reasons & 8) <> 0) AS hw_slowdown_samples,
        count(*) FILTER (WHERE (reasons & 128) <> 0) AS power_brake_samples,
        count(*) FILTER (WHERE (reasons & 232) <> 0) AS throttled_samples,
        count(*) FILTER (WHERE gpu_util_pct > 0) AS busy_samples,
        count(*) FILTER (WHERE (reasons & 232) <> 0 AND gpu_util_pct > 0)
            AS throttled_busy_samples,
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
    GROUP BY gpu_id, floor(epoch(ts) / 3600)
)
-- the key values joined back to the (far fewer) hourly rows, with one of the models the hour's
-- rows name (null only when none does)
SELECT
    v.cluster,
    v.node,
    v.gpu_uuid,
    v.gpu_index,
    v.model,
    h.* EXCLUDE (gpu_id, variant_id)
FROM hourly AS h
INNER JOIN numbered AS v
    ON v.variant_id = h.variant_id
ORDER BY v.cluster, v.node, v.gpu_index, h.hour
