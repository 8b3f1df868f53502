-- unusable_samples: how many of a day's samples the sample-level marts cannot use whole.
--
-- Grain:   one row
-- Reads:   day_samples (the day's gpu_samples rows, as the per-day pass reads them)
-- Params:
--   $first_day  the first day (UTC) whose folders the files are in
--   $last_day   the last (the same day, unless consecutive days are built together)
-- Returns: nameless (samples naming neither their GPU's UUID nor its index), no_interval
--          (samples whose interval_s is null, NaN, infinite, 0 or less, or above an hour: no
--          sampling step, sql/views/sample_steps.sql), elsewhere (samples
--          dated another day than their folder's)
--
-- A nameless sample has no GPU to count it on: the marts leave it out. A sample without an
-- interval stands for no time: it counts in no GPU-hour (sql/views/sample_steps.sql). A sample
-- in another day's folder is in no partition the pass builds (each day's are built from its
-- own folder). All come from files another tool wrote; the per-day pass
-- (warehouse/partitions.py) says how many.

SELECT
    count(*) FILTER (WHERE gpu_uuid IS NULL AND gpu_index IS NULL) AS nameless,
    count(*) FILTER (
        WHERE NOT coalesce(
            interval_s - interval_s = 0 AND interval_s > 0 AND interval_s <= 3600, false
        )
    )
        AS no_interval,
    count(*) FILTER (WHERE CAST(ts AS DATE) NOT BETWEEN $first_day AND $last_day) AS elsewhere
FROM day_samples
