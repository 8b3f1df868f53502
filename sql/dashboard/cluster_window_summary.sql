-- cluster_window_summary: the headline numbers of one cluster over a time window.
--
-- Grain:   one row (no row when the window holds no data)
-- Reads:   gpu_job_buckets, cluster_occupancy
-- Params:
--   $cluster  the cluster
--   $start    inclusive lower bound on bucket (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      exclusive upper bound on bucket
-- Returns: gpus_total, hours, capacity_gpu_h, allocated_gpu_h, active_gpu_h,
--          idle_allocated_gpu_h, unallocated_gpu_h, effective_gpu_h, occupancy,
--          idle_share_of_allocated, energy_kwh, jobs
--
-- Capacity is GPUs × the part of the window that has data; samples count in the bucket of
-- their ts (a sample spanning the window's end counts whole).

WITH buckets AS (
    SELECT
        min(first_e) AS first_e,
        max(last_end_e) AS last_e,
        sum(observed_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS allocated_gpu_h,
        sum(active_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS active_gpu_h,
        sum(idle_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS idle_allocated_gpu_h,
        sum(observed_s * share) FILTER (WHERE job_id IS NULL) / 3600.0 AS unallocated_gpu_h,
        sum(effective_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS effective_gpu_h,
        sum(energy_j) / 3600000.0 AS energy_kwh,
        count(DISTINCT job_id) AS jobs
    FROM gpu_job_buckets
    WHERE cluster = $cluster
        AND bucket >= $start
        AND bucket < $end
),
fleet AS (
    SELECT
        max(gpus_total) AS gpus_total
    FROM cluster_occupancy
    WHERE cluster = $cluster
)
SELECT
    f.gpus_total,
    (b.last_e - b.first_e) / 3600.0 AS hours,
    f.gpus_total * (b.last_e - b.first_e) / 3600.0 AS capacity_gpu_h,
    coalesce(b.allocated_gpu_h, 0) AS allocated_gpu_h,
    coalesce(b.active_gpu_h, 0) AS active_gpu_h,
    coalesce(b.idle_allocated_gpu_h, 0) AS idle_allocated_gpu_h,
    coalesce(b.unallocated_gpu_h, 0) AS unallocated_gpu_h,
    coalesce(b.effective_gpu_h, 0) AS effective_gpu_h,
    coalesce(b.allocated_gpu_h, 0) / nullif(f.gpus_total * (b.last_e - b.first_e) / 3600.0, 0)
        AS occupancy,
    coalesce(b.idle_allocated_gpu_h, 0) / nullif(b.allocated_gpu_h, 0) AS idle_share_of_allocated,
    b.energy_kwh,
    b.jobs
FROM buckets AS b, fleet AS f
WHERE b.first_e IS NOT NULL
