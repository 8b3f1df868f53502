-- job_gpu_series: one job's busy fraction per GPU and time bucket (for sparklines).
--
-- Grain:   one row per (device, mig_instance, bucket) of the job
-- Reads:   gpu_job_buckets
-- Params:
--   $cluster  the job's cluster
--   $job_id   the job id
-- Returns: device, mig_instance, bucket, busy, power_w
--
-- busy is null in a bucket without a known busy value (no utilisation field).

SELECT
    device,
    mig_instance,
    bucket,
    sum(effective_s) / nullif(sum(busy_known_s), 0) AS busy,
    sum(power_sum) / nullif(sum(power_known_s), 0) AS power_w
FROM gpu_job_buckets
WHERE cluster = $cluster AND job_id = $job_id
GROUP BY device, mig_instance, bucket
ORDER BY device, mig_instance, bucket
