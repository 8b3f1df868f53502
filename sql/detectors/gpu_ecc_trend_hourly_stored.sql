-- gpu_ecc_trend_hourly_stored: the rows of sql/detectors/gpu_ecc_trend_hourly.sql, from the
-- hours the lake keeps.
--
-- Grain:   one row per (cluster, gpu_uuid, hour) with a sample or a precursor XID
-- Reads:   gpu_ecc_hourly (the hours `gpuledger detect` keeps a day at a time from the sample
--          files, warehouse/detector_days.py), gpu_events
-- Params:
--   $since          ignore hours and events before this time (TIMESTAMP, UTC); an hour is
--                   whole: the rules read these rows only for a `since` on the hour
--                   (detectors/rules/run.py)
--   $precursor_xids the XID codes that warn of a failure to come (INTEGER[])
-- Returns: the columns of sql/detectors/gpu_ecc_trend_hourly.sql, in its order
--
-- An hour's new errors are its steps between its own samples plus the step into its first
-- sample from the GPU's last sample before it (the last of the GPU's kept hours before, in
-- `since`'s window): as there, the window's first sample has no step, and a step down is a
-- reset whose count after it is new.

WITH kept AS (
    SELECT
        *,
        lag(last_sbe) OVER (PARTITION BY cluster, gpu_uuid ORDER BY hour) AS sbe_before
    FROM gpu_ecc_hourly
    WHERE hour >= $since
),
hourly AS (
    SELECT
        cluster,
        gpu_uuid,
        hour,
        node,
        gpu_index,
        samples,
        sbe_steps + CASE
            WHEN sbe_before IS NULL THEN 0
            WHEN first_sbe < sbe_before THEN first_sbe
            ELSE first_sbe - sbe_before
        END AS sbe_new,
        sbe_max,
        remap_pending
    FROM kept
),
xids AS (
    SELECT
        cluster,
        gpu_uuid,
        to_timestamp(floor(epoch(ts) / 3600) * 3600) AS hour,
        any_value(node) AS node,
        any_value(gpu_index) AS gpu_index,
        count(*) AS precursor_xids
    FROM gpu_events
    WHERE
        kind = 'xid'
        AND ts >= $since
        AND gpu_uuid IS NOT NULL
        AND list_contains($precursor_xids, TRY_CAST(code AS INTEGER))  -- (a code past INTEGER is none)
    GROUP BY cluster, gpu_uuid, hour
)
SELECT
    coalesce(h.cluster, x.cluster) AS cluster,
    coalesce(h.gpu_uuid, x.gpu_uuid) AS gpu_uuid,
    coalesce(h.node, x.node) AS node,
    coalesce(h.gpu_index, x.gpu_index) AS gpu_index,
    coalesce(h.hour, x.hour) AS hour,
    coalesce(h.samples, 0) AS samples,
    coalesce(h.sbe_new, 0) AS sbe_new,
    h.sbe_max,
    coalesce(h.remap_pending, false) AS remap_pending,
    coalesce(x.precursor_xids, 0) AS precursor_xids
FROM hourly AS h
FULL OUTER JOIN xids AS x
    ON x.cluster = h.cluster AND x.gpu_uuid = h.gpu_uuid AND x.hour = h.hour
ORDER BY cluster, gpu_uuid, hour
