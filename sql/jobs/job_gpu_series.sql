-- job_gpu_series: one job's busy fraction per GPU, bucket after bucket (for sparklines).
--
-- Grain:   one row per (device, mig_instance) of the job
-- Reads:   gpu_job_buckets
-- Params:
--   $cluster  the job's cluster
--   $job_id   the job id
-- Returns: device, mig_instance, series_start, busy_series
--
-- busy_series holds the busy fraction of each of the GPU's buckets in time order, from the
-- bucket series_start on; an entry is null in a bucket without a known busy value (no
-- utilisation field). One row per GPU, not per bucket: a 64-GPU week is 129 k buckets, which
-- as rows cost the reader far more than the query.

WITH buckets AS (
    SELECT
        device,
        mig_instance,
        bucket,
        sum(effective_s) / nullif(sum(busy_known_s), 0) AS busy
    FROM gpu_job_buckets
    WHERE cluster = $cluster AND job_id = $job_id
    GROUP BY device, mig_instance, bucket
)
SELECT
    device,
    mig_instance,
    min(bucket) AS series_start,
    list(busy ORDER BY bucket) AS busy_series
FROM buckets
GROUP BY device, mig_instance
ORDER BY device, mig_instance
