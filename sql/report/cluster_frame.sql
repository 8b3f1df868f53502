-- cluster_frame: a week of GPU capacity as sreport's `cluster Utilization -T gres/gpu` frames it
-- — allocated (split into active and idle-allocated), planned (unallocated while jobs waited),
-- idle (unallocated, nothing waiting), and unobserved (no telemetry: down or not reporting).
--
-- Grain:   one row
-- Reads:   cluster_occupancy, gpu_job_buckets (the data's span), jobs_latest
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
-- whatever the caller's configuration says; $bucket_s only where there is one bucket. The
-- first and last buckets are cut to the data's span, as cluster_occupancy averages them (a
-- last bucket of 25 s counted 300 s of every GPU).

WITH data_span AS (
    SELECT
        min(first_e) AS first_e,
        max(last_end_e) AS last_e
    FROM gpu_job_buckets
    WHERE cluster = $cluster
),

spacing AS (
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
        o.bucket,
        o.gpus_total,
        o.gpus_allocated,
        o.gpus_active,
        o.gpus_idle_allocated,
        o.gpus_unallocated,
        o.gpus_unobserved,
        greatest(
            least(epoch(o.bucket) + s.width_s, coalesce(d.last_e, epoch(o.bucket) + s.width_s))
                - greatest(epoch(o.bucket), coalesce(d.first_e, epoch(o.bucket))),
            0
        ) AS seconds
    FROM cluster_occupancy AS o
    CROSS JOIN spacing AS s
    CROSS JOIN data_span AS d
    WHERE o.cluster = $cluster
        AND epoch(o.bucket) >= $week_start_e
        AND epoch(o.bucket) < $week_end_e
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
    coalesce(sum(b.gpus_total * b.seconds), 0) / 3600.0 AS reported_gpu_h,
    coalesce(sum(b.gpus_allocated * b.seconds), 0) / 3600.0 AS allocated_gpu_h,
    coalesce(sum(b.gpus_active * b.seconds), 0) / 3600.0 AS active_gpu_h,
    coalesce(sum(b.gpus_idle_allocated * b.seconds), 0) / 3600.0 AS idle_allocated_gpu_h,
    coalesce(sum(b.gpus_unallocated * b.seconds) FILTER (WHERE w.bucket IS NOT NULL), 0) / 3600.0
        AS planned_gpu_h,
    coalesce(sum(b.gpus_unallocated * b.seconds) FILTER (WHERE w.bucket IS NULL), 0) / 3600.0
        AS idle_gpu_h,
    coalesce(sum(b.gpus_unobserved * b.seconds), 0) / 3600.0 AS unobserved_gpu_h,
    count(b.bucket) AS buckets
FROM spacing AS s
LEFT JOIN buckets AS b
    ON true
LEFT JOIN waiting AS w
    ON w.bucket = b.bucket
GROUP BY s.width_s
