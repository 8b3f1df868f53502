-- gpu_ecc_trend_hourly: per GPU and hour, the new corrected (single-bit) ECC errors, the
-- precursor XIDs and whether a row remap was pending: the input of the health-trend rule.
--
-- Grain:   one row per (cluster, gpu_uuid, hour) with a sample or a precursor XID
-- Reads:   gpu_samples, gpu_events
-- Params:
--   $since          ignore samples and events before this time (TIMESTAMP, UTC)
--   $precursor_xids the XID codes that warn of a failure to come (INTEGER[], e.g. 63, 92, 119)
-- Returns: cluster, gpu_uuid, node, gpu_index, hour, samples, sbe_new, sbe_max, remap_pending,
--          precursor_xids
--
-- ecc_sbe_volatile is a counter since the driver load (DCGM field 310): its new errors are the
-- steps between one GPU's consecutive samples. A step down is a reset (a driver reload or a
-- GPU reset): the count after it is new errors since the reset. Lost scrapes and exporter
-- outages need no care: the step across a gap holds the errors of the gap, counted in the hour
-- the samples resume. The first sample in the window has no step (nothing to compare with).
-- On a MIG GPU the device fields repeat on every instance: the repeats of one sample time are
-- steps of 0, so the errors count once (samples then counts rows, not sample times). Rows of
-- one time with different counts (two sources landing one GPU) are taken least first, so the
-- count does not hang on the order the rows were read.
--
-- Each GPU (and each node and index it reported under) is numbered first, as the per-day pass
-- numbers devices (sql/views/sample_devices.sql): the window that finds each sample's
-- predecessor then sorts integers, not the key's strings.

WITH variants AS (
    -- each GPU's key values: a few rows per GPU
    SELECT DISTINCT cluster, gpu_uuid, node, gpu_index
    FROM gpu_samples
    WHERE ts >= $since AND gpu_uuid IS NOT NULL AND ecc_sbe_volatile IS NOT NULL
),
numbered AS (
    SELECT
        *,
        -- a GPU's variants with an index first: the least of its rows' numbers names an index
        -- whenever one of them does
        row_number() OVER (ORDER BY cluster, gpu_uuid, gpu_index NULLS LAST, node) AS variant_id,
        dense_rank() OVER (ORDER BY cluster, gpu_uuid) AS gpu_id
    FROM variants
),
steps AS (
    SELECT
        v.gpu_id,
        v.variant_id,
        s.ts,
        s.ecc_sbe_volatile AS sbe,
        s.remap_pending,
        s.ecc_sbe_volatile - lag(s.ecc_sbe_volatile) OVER (
            PARTITION BY v.gpu_id ORDER BY s.ts, s.ecc_sbe_volatile
        ) AS step
    FROM gpu_samples AS s
    INNER JOIN numbered AS v
        ON v.cluster = s.cluster
        AND v.gpu_uuid = s.gpu_uuid
        AND v.node = s.node
        AND v.gpu_index IS NOT DISTINCT FROM s.gpu_index
    WHERE s.ts >= $since AND s.ecc_sbe_volatile IS NOT NULL
),
hourly AS (
    SELECT
        v.cluster,
        v.gpu_uuid,
        h.hour,
        v.node,
        v.gpu_index,
        h.samples,
        h.sbe_new,
        h.sbe_max,
        h.remap_pending
    FROM (
        SELECT
            gpu_id,
            to_timestamp(floor(epoch(ts) / 3600) * 3600) AS hour,
            -- the node and index of one of the hour's samples (an index whenever one has one)
            min(variant_id) AS variant_id,
            count(*) AS samples,
            sum(CASE WHEN step IS NULL THEN 0 WHEN step < 0 THEN sbe ELSE step END) AS sbe_new,
            max(sbe) AS sbe_max,
            coalesce(bool_or(remap_pending), false) AS remap_pending
        FROM steps
        GROUP BY gpu_id, hour
    ) AS h
    INNER JOIN numbered AS v
        ON v.variant_id = h.variant_id
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
