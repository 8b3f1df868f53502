-- cluster_frame: a week of GPU capacity as sreport's `cluster Utilization -T gres/gpu` frames it
-- — allocated (split into active and idle-allocated), planned (unallocated while jobs waited),
-- idle (unallocated, nothing waiting), and unobserved (no telemetry: down or not reporting).
--
-- Grain:   one row
-- Reads:   cluster_occupancy, jobs_latest
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
--   $bucket_s      the bucket width where the cluster has a single bucket (seconds)
-- Returns: reported_gpu_h, allocated_gpu_h, active_gpu_h, idle_allocated_gpu_h, planned_gpu_h,
--          idle_gpu_h, unobserved_gpu_h, buckets
--
-- A bucket counts as "jobs waiting" when a job that asked for GPUs (a CPU job, gpus 0, does not
-- wait for one) was queued (submitted, not started) at its start.
-- A bucket stands for its width: the spacing of the cluster's buckets (cluster_occupancy has
-- every bucket of the data's span), so the figures follow the width the marts were built with,
-- whatever the caller's configuration says; $bucket_s only where there is one bucket.

WITH spacing AS (
    SELECT coalesce(min(gap_s), $bucket_s) AS width_s
    FROM (
        SELECT epoch(bucket) - epoch(lag(bucket) OVER (ORDER BY bucket)) AS gap_s
        FROM cluster_occupancy
        WHERE cluster = $cluster
    )
    WHERE gap_s > 0
),
buckets AS (
    SELECT
        bucket,
        gpus_total,
        gpus_allocated,
        gpus_active,
        gpus_idle_allocated,
        gpus_unallocated,
        gpus_unobserved
    FROM cluster_occupancy
    WHERE cluster = $cluster
        AND epoch(bucket) >= $week_start_e
        AND epoch(bucket) < $week_end_e
),
waiting AS (
    SELECT DISTINCT b.bucket
    FROM buckets AS b
    JOIN jobs_latest AS j
        ON j.cluster = $cluster
        AND j.submit_ts <= b.bucket
        AND coalesce(j.start_ts, j.end_ts, b.bucket + INTERVAL 1 SECOND) > b.bucket
        AND coalesce(greatest(j.gpus_requested, j.gpus) > 0, TRUE)
)
SELECT
    coalesce(sum(b.gpus_total), 0) * s.width_s / 3600.0 AS reported_gpu_h,
    coalesce(sum(b.gpus_allocated), 0) * s.width_s / 3600.0 AS allocated_gpu_h,
    coalesce(sum(b.gpus_active), 0) * s.width_s / 3600.0 AS active_gpu_h,
    coalesce(sum(b.gpus_idle_allocated), 0) * s.width_s / 3600.0 AS idle_allocated_gpu_h,
    coalesce(sum(b.gpus_unallocated) FILTER (WHERE w.bucket IS NOT NULL), 0) * s.width_s / 3600.0
        AS planned_gpu_h,
    coalesce(sum(b.gpus_unallocated) FILTER (WHERE w.bucket IS NULL), 0) * s.width_s / 3600.0
        AS idle_gpu_h,
    coalesce(sum(b.gpus_unobserved), 0) * s.width_s / 3600.0 AS unobserved_gpu_h,
    count(b.bucket) AS buckets
FROM spacing AS s
LEFT JOIN buckets AS b
    ON true
LEFT JOIN waiting AS w
    ON w.bucket = b.bucket
GROUP BY s.width_s
