-- occupancy_series: GPUs by state over time, for the stacked-area chart of the overview.
--
-- Grain:   one row per (cluster, bucket)
-- Reads:   cluster_occupancy, gpu_job_buckets (where the data ends)
-- Params:
--   $cluster  the cluster to show
--   $start    inclusive lower bound on bucket (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      exclusive upper bound on bucket
-- Returns: bucket, active, idle_allocated, unallocated, unobserved
--
-- "active" and "idle_allocated" split the allocated GPUs; allocated GPUs whose activity is
-- unknown (no utilisation field at all) are shown as active.
-- The series ends with the last bucket the data covers whole (as `gpuledger serve`'s "now",
-- sql/serve/occupancy_now.sql): the bucket the end of the data cuts short averages its GPUs
-- over the whole bucket, so the chart ended on half the fleet "unobserved" (15 of 32 GPUs).
-- A cluster whose data is shorter than one bucket keeps its one. The bucket width is the
-- spacing of the cluster's buckets (sql/attribution/bucket_width.sql).

WITH cluster_buckets AS (
    SELECT
        bucket,
        gpus_allocated,
        gpus_idle_allocated,
        gpus_unallocated,
        gpus_unobserved,
        epoch(bucket) - epoch(lag(bucket) OVER (ORDER BY bucket)) AS gap_s
    FROM cluster_occupancy
    WHERE cluster = $cluster
),
data_end AS (
    -- where the telemetry ends, read near the window only (cluster_data_end reads the whole
    -- history): the buckets from a day before it (a sample spans at most 2 hours) to a day
    -- after it; data going on past the window leaves every bucket of it whole
    SELECT max(interval_end_e) AS end_e
    FROM gpu_job_buckets
    WHERE cluster = $cluster
        AND bucket >= $start - INTERVAL 1 DAY
        AND bucket < $end + INTERVAL 1 DAY
),
last_whole AS (
    -- the start of the last bucket that ends at or before the end of the data
    SELECT max(b.bucket) AS bucket
    FROM cluster_buckets AS b, data_end AS e
    WHERE epoch(b.bucket) + (SELECT min(gap_s) FROM cluster_buckets WHERE gap_s > 0) <= e.end_e
)
SELECT
    b.bucket,
    b.gpus_allocated - b.gpus_idle_allocated AS active,
    b.gpus_idle_allocated AS idle_allocated,
    b.gpus_unallocated AS unallocated,
    greatest(b.gpus_unobserved, 0) AS unobserved
FROM cluster_buckets AS b, last_whole AS w
WHERE b.bucket >= $start
    AND b.bucket < $end
    AND (w.bucket IS NULL OR b.bucket <= w.bucket)
ORDER BY b.bucket
