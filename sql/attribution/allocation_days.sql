-- allocation_days: a digest of the allocations that can own each day's samples.
--
-- Grain:   one row per (cluster, UTC day) that some job_gpus row covers, $first_day to $last_day
-- Reads:   job_gpus
-- Params:
--   $first_day  the first day wanted (DATE)
--   $last_day   the last day wanted (DATE); an allocation still open covers up to it
-- Returns: cluster, date, digest (VARCHAR)
--
-- A day's samples are owned by the allocations whose [start_ts, end_ts) overlaps the day
-- (sql/attribution/sample_owners.sql), so a day's partitions are built again when this digest
-- changes: a late scheduler record rebuilds exactly the days it touches. Each allocation is
-- clipped to the day and the day after first: a sample's span stops at its owner's end
-- (sql/views/sample_spans.sql) and may run into the next day, so an end landing early in a
-- day changes the day before's spans too. A job's end landing later changes the digests of its
-- last day and the one before only, not those of the days it ran through. The digest is
-- order-free (a sum of row hashes, and the count), as the rule is.

WITH covering AS (
    SELECT
        cluster,
        job_id,
        node,
        gpu_index,
        gpu_uuid,
        mig_instance,
        start_ts,
        end_ts,
        unnest(generate_series(
            greatest(CAST(start_ts AS DATE), $first_day),
            least(
                CAST(coalesce(end_ts - INTERVAL 1 MICROSECOND, $last_day) AS DATE), $last_day
            ),
            INTERVAL 1 DAY
        )) AS day
    FROM job_gpus
    WHERE start_ts IS NOT NULL
        AND (end_ts IS NULL OR end_ts > start_ts)
        AND CAST(start_ts AS DATE) <= $last_day
        AND (end_ts IS NULL OR end_ts > $first_day)
)
SELECT
    cluster,
    CAST(day AS DATE) AS date,
    CAST(sum(hash(
        job_id,
        node,
        gpu_index,
        gpu_uuid,
        mig_instance,
        greatest(start_ts, day),
        least(coalesce(end_ts, day + INTERVAL 2 DAY), day + INTERVAL 2 DAY)
    )) AS VARCHAR) || '/' || CAST(count(*) AS VARCHAR) AS digest
FROM covering
GROUP BY cluster, day
