-- gpu_ecc_hourly: per GPU and hour, the corrected (single-bit) ECC counter's steps within the
-- hour and its first and last value: what `gpuledger detect` keeps, a day at a time, of what
-- sql/detectors/gpu_ecc_trend_hourly.sql reads of the samples (warehouse/detector_days.py).
--
-- Grain:   one row per (cluster, gpu_uuid, hour) with a sample that has the counter
-- Reads:   gpu_samples (one day's files)
-- Params:  none
-- Returns: cluster, gpu_uuid, node, gpu_index, hour, samples, sbe_steps, first_sbe, last_sbe,
--          sbe_max, remap_pending
--
-- sbe_steps are the new errors between the hour's consecutive samples, counted as
-- gpu_ecc_trend_hourly.sql counts them (a step down is a reset: the count after it is new). The
-- step into the hour's first sample, from the GPU's sample before it (in an hour before, maybe
-- a day before), is added where the hours are put together
-- (sql/detectors/gpu_ecc_trend_hourly_stored.sql), from `first_sbe` and the hour before's
-- `last_sbe`. The node and index are those of one of the hour's samples, chosen as
-- gpu_ecc_trend_hourly.sql chooses them (an index whenever one has one, then the least).

WITH variants AS (
    -- each GPU's key values: a few rows per GPU
    SELECT DISTINCT cluster, gpu_uuid, node, gpu_index
    FROM gpu_samples
    WHERE gpu_uuid IS NOT NULL AND ecc_sbe_volatile IS NOT NULL
),
numbered AS (
    SELECT
        *,
        row_number() OVER (ORDER BY cluster, gpu_uuid, gpu_index NULLS LAST, node) AS variant_id,
        dense_rank() OVER (ORDER BY cluster, gpu_uuid) AS gpu_id
    FROM variants
),
steps AS (
    SELECT
        v.gpu_id,
        v.variant_id,
        to_timestamp(floor(epoch(s.ts) / 3600) * 3600) AS hour,
        s.ts,
        s.ecc_sbe_volatile AS sbe,
        s.remap_pending
    FROM gpu_samples AS s
    INNER JOIN numbered AS v
        ON v.cluster = s.cluster
        AND v.gpu_uuid = s.gpu_uuid
        AND v.node = s.node
        AND v.gpu_index IS NOT DISTINCT FROM s.gpu_index
    WHERE s.ecc_sbe_volatile IS NOT NULL
),
stepped AS (
    SELECT
        *,
        sbe - lag(sbe) OVER (PARTITION BY gpu_id, hour ORDER BY ts, sbe) AS step
    FROM steps
)
SELECT
    v.cluster,
    v.gpu_uuid,
    v.node,
    v.gpu_index,
    h.hour,
    h.samples,
    h.sbe_steps,
    h.first_sbe,
    h.last_sbe,
    h.sbe_max,
    h.remap_pending
FROM (
    SELECT
        gpu_id,
        hour,
        min(variant_id) AS variant_id,
        count(*) AS samples,
        -- (as a double: a sum of steps of counters near int64's end need not fit one)
        CAST(sum(CASE WHEN step IS NULL THEN 0 WHEN step < 0 THEN sbe ELSE step END) AS DOUBLE)
            AS sbe_steps,
        -- in the steps' order: rows of one time least first (gpu_ecc_trend_hourly.sql)
        arg_min(sbe, {'t': ts, 's': sbe}) AS first_sbe,
        arg_max(sbe, {'t': ts, 's': sbe}) AS last_sbe,
        max(sbe) AS sbe_max,
        coalesce(bool_or(remap_pending), false) AS remap_pending
    FROM stepped
    GROUP BY gpu_id, hour
) AS h
INNER JOIN numbered AS v
    ON v.variant_id = h.variant_id
ORDER BY v.cluster, v.gpu_uuid, h.hour
