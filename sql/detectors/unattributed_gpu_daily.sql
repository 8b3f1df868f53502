-- unattributed_gpu_daily: GPUs that worked while no job held them, per GPU and UTC day.
--
-- Grain:   one row per (cluster, device, day) with observed time and no owning job
-- Reads:   gpu_job_buckets
-- Params:
--   $since  ignore buckets before this time (TIMESTAMP, UTC)
-- Returns: cluster, device, node, gpu_index, gpu_uuid, day, observed_s, active_s, first_ts,
--          last_ts
--
-- Activity with no job means either a process outside the scheduler or a broken mapping
-- (missing job_gpus rows, a wrong GPU index): the attribution key needs checking. Times are
-- the physical GPU's: a MIG instance's count as its share of its GPU (the share-weighted
-- seconds), so a GPU's day never holds more than a day.

SELECT
    cluster,
    device,
    any_value(node) AS node,
    any_value(gpu_index) AS gpu_index,
    any_value(gpu_uuid) AS gpu_uuid,
    CAST(bucket AS DATE) AS day,
    sum(observed_share_s) AS observed_s,
    -- work is known only where a busy field was: a GPU reporting none of them (power alone,
    -- or only values that are no number) is not said to have worked
    sum(active_share_s) FILTER (WHERE busy_known_s > 0) AS active_s,
    min(bucket) FILTER (WHERE active_s > 0 AND busy_known_s > 0) AS first_ts,
    max(bucket) FILTER (WHERE active_s > 0 AND busy_known_s > 0) AS last_ts
FROM gpu_job_buckets
WHERE job_id IS NULL
    AND bucket >= $since
GROUP BY cluster, device, CAST(bucket AS DATE)
ORDER BY cluster, device, day
