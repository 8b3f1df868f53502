-- efficiency_histogram: how the window's GPU-hours spread over job efficiency (busy) bands.
--
-- Grain:   one row per 10 %-wide band of busy_mean that holds a job
-- Reads:   job_usage
-- Params:
--   $cluster  the cluster
--   $start    only jobs running after this, or starting at or after it (one that ran before and ended at it ran none of the window) (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      only jobs started before this
--   $viewer   only this user's jobs, or NULL for everyone's
--             (a user name matches in any case)
-- Returns: band_low, band, jobs, alloc_gpu_h
--
-- A job at exactly 100 % busy falls in the top band (90-100 %); jobs never observed
-- (busy_mean null) are left out.

SELECT
    least(floor(busy_mean * 10), 9) / 10.0 AS band_low,
    CAST(CAST(least(floor(busy_mean * 10), 9) * 10 AS INTEGER) AS VARCHAR) || '–'
        || CAST(CAST(least(floor(busy_mean * 10), 9) * 10 + 10 AS INTEGER) AS VARCHAR) || ' %'
        AS band,
    count(*) AS jobs,
    sum(alloc_gpu_h) AS alloc_gpu_h
FROM job_usage
WHERE cluster = $cluster
    AND (end_ts IS NULL OR end_ts > $start OR start_ts >= $start)
    AND start_ts < $end
    AND busy_mean IS NOT NULL
    AND ($viewer IS NULL OR lower(user) = lower($viewer))
GROUP BY band_low, band
ORDER BY band_low
