-- cluster_summary: the headline numbers of each cluster over the whole of its data.
--
-- Grain:   one row per cluster
-- Reads:   gpu_job_buckets, cluster_occupancy, job_usage
-- Params:  none
-- Returns: cluster, data_start, data_end, gpus_total, span_h, capacity_gpu_h, allocated_gpu_h,
--          active_gpu_h, idle_allocated_gpu_h, unallocated_gpu_h, unobserved_gpu_h,
--          effective_gpu_h, occupancy, idle_share_of_allocated, energy_kwh, jobs
--
-- GPU-hours come from the per-bucket sums (exact); capacity = GPUs × the data's span, and
-- unobserved is what is left of it. occupancy = allocated / capacity.

WITH buckets AS (
    SELECT
        cluster,
        min(first_e) AS first_e,
        max(last_end_e) AS last_e,
        sum(observed_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS allocated_gpu_h,
        sum(active_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS active_gpu_h,
        sum(idle_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS idle_allocated_gpu_h,
        coalesce(sum(observed_s * share) FILTER (WHERE job_id IS NULL), 0) / 3600.0
            AS unallocated_gpu_h,
        sum(effective_s * share) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS effective_gpu_h,
        sum(energy_j) / 3600000.0 AS energy_kwh
    FROM gpu_job_buckets
    GROUP BY cluster
),
fleet AS (
    SELECT
        cluster,
        max(gpus_total) AS gpus_total
    FROM cluster_occupancy
    GROUP BY cluster
),
jobs AS (
    SELECT
        cluster,
        count(*) AS jobs
    FROM job_usage
    GROUP BY cluster
)
SELECT
    b.cluster,
    to_timestamp(b.first_e) AS data_start,
    to_timestamp(b.last_e) AS data_end,
    f.gpus_total,
    (b.last_e - b.first_e) / 3600.0 AS span_h,
    f.gpus_total * (b.last_e - b.first_e) / 3600.0 AS capacity_gpu_h,
    coalesce(b.allocated_gpu_h, 0) AS allocated_gpu_h,
    coalesce(b.active_gpu_h, 0) AS active_gpu_h,
    coalesce(b.idle_allocated_gpu_h, 0) AS idle_allocated_gpu_h,
    b.unallocated_gpu_h,
    f.gpus_total * (b.last_e - b.first_e) / 3600.0
        - coalesce(b.allocated_gpu_h, 0) - b.unallocated_gpu_h AS unobserved_gpu_h,
    coalesce(b.effective_gpu_h, 0) AS effective_gpu_h,
    coalesce(b.allocated_gpu_h, 0) / nullif(f.gpus_total * (b.last_e - b.first_e) / 3600.0, 0)
        AS occupancy,
    coalesce(b.idle_allocated_gpu_h, 0) / nullif(b.allocated_gpu_h, 0) AS idle_share_of_allocated,
    b.energy_kwh,
    coalesce(j.jobs, 0) AS jobs
FROM buckets AS b
JOIN fleet AS f
    ON f.cluster = b.cluster
LEFT JOIN jobs AS j
    ON j.cluster = b.cluster
ORDER BY b.cluster
