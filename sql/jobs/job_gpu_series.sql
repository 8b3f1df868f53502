-- job_gpu_series: one job's busy fraction per GPU, bucket after bucket (for sparklines).
--
-- Grain:   one row per (device, mig_instance) of the job
-- Reads:   gpu_job_buckets
-- Params:
--   $cluster  the job's cluster
--   $job_id   the job id
-- Returns: device, mig_instance, series_start, busy_series
--
-- busy_series holds the busy fraction of each bucket in time order, from series_start on, on
-- one time axis for all the job's GPUs: from the job's first bucket to its last, each GPU's
-- entry null in a bucket it has no known busy value for (no sample there, or no utilisation
-- field), so a gap in the telemetry is a gap in the line, and a GPU that reported only late
-- is drawn late. The bucket width is the least step between two of the job's buckets. One row
-- per GPU, not per bucket: a 64-GPU week is 129 k buckets, which as rows cost the reader far
-- more than the query.

WITH buckets AS (
    SELECT
        device,
        mig_instance,
        bucket,
        sum(effective_s) / nullif(sum(busy_known_s), 0) AS busy
    FROM gpu_job_buckets
    WHERE cluster = $cluster AND job_id = $job_id
    GROUP BY device, mig_instance, bucket
),
axis AS (
    SELECT
        min(bucket_e) AS first_e,
        max(bucket_e) AS last_e,
        coalesce(min(step_s), 300) AS width_s
    FROM (
        SELECT
            bucket_e,
            bucket_e - lag(bucket_e) OVER (ORDER BY bucket_e) AS step_s
        FROM (SELECT DISTINCT epoch(bucket) AS bucket_e FROM buckets) AS b
    ) AS s
),
slots AS (
    SELECT
        d.device,
        d.mig_instance,
        n,
        a.first_e + n * a.width_s AS bucket_e
    FROM (SELECT DISTINCT device, mig_instance FROM buckets) AS d,
        axis AS a,
        range(0, CAST(round((a.last_e - a.first_e) / a.width_s) AS BIGINT) + 1) AS r(n)
)
SELECT
    s.device,
    s.mig_instance,
    to_timestamp(min(s.bucket_e)) AS series_start,
    list(b.busy ORDER BY s.n) AS busy_series
FROM slots AS s
LEFT JOIN buckets AS b
    ON b.device = s.device
    AND b.mig_instance IS NOT DISTINCT FROM s.mig_instance
    AND epoch(b.bucket) = s.bucket_e
GROUP BY s.device, s.mig_instance
ORDER BY s.device, s.mig_instance
