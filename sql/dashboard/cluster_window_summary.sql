-- cluster_window_summary: the headline numbers of one cluster over a time window.
--
-- Grain:   one row (no row when the window holds no data)
-- Reads:   gpu_job_buckets, cluster_occupancy
-- Params:
--   $cluster  the cluster
--   $start    inclusive lower bound on bucket (TIMESTAMP WITH TIME ZONE, UTC); a bucket's
--             start (the dashboard's windows are whole UTC days)
--   $end      exclusive upper bound on bucket; a bucket's start too
-- Returns: gpus_total, hours, capacity_gpu_h, allocated_gpu_h, active_gpu_h,
--          idle_allocated_gpu_h, unallocated_gpu_h, effective_gpu_h, occupancy,
--          idle_share_of_allocated, energy_kwh, jobs
--
-- Capacity is GPUs × the part of the window that has data. A sample counts in the window for
-- the part of its span inside it, as usage_daily counts a day (job_gpu_daily.next_day_s): the
-- sample that runs past the window's end counts only to it, and the one before the window that
-- runs into it counts from its start (the bucket's crossing sample, carry_share of the GPU;
-- active or idle as it was, carry_busy of it effective). Energy stays with its sample. The
-- Overview counted both edges' samples whole in their bucket, so it did not add up with the
-- Users page's (usage_daily's) figures for the same days. (A MIG instance counts as its share
-- of the GPU here, as occupancy does; usage_daily counts a job's instance-hours.)

WITH edges AS (
    SELECT
        epoch($start) AS start_e,
        epoch($end) AS end_e
),
rows AS (
    SELECT
        b.*,
        b.bucket >= $start AS inside,
        -- the crossing sample's part moved across an edge: into the window from a bucket
        -- before it, out of it past its end (carry_share: the part of the GPU it holds)
        CASE
            WHEN b.bucket < $start THEN greatest(least(b.last_end_e, e.end_e) - e.start_e, 0)
            ELSE -greatest(b.last_end_e - e.end_e, 0)
        END * coalesce(b.carry_share, 0) AS moved_s
    FROM gpu_job_buckets AS b, edges AS e
    WHERE b.cluster = $cluster
        -- (a day before it: more than the longest span a sample has, 2 × its interval of
        -- at most an hour, sql/views/sample_steps.sql)
        AND b.bucket >= $start - INTERVAL 1 DAY
        AND b.bucket < $end
        AND (b.bucket >= $start OR b.last_end_e > e.start_e)
),
buckets AS (
    SELECT
        least(
            min(first_e) FILTER (WHERE inside),
            min(e.start_e) FILTER (WHERE NOT inside AND moved_s > 0)
        ) AS first_e,
        least(max(last_end_e), any_value(e.end_e)) AS last_e,
        sum(CASE WHEN inside THEN observed_s * share ELSE 0 END + moved_s)
            FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS allocated_gpu_h,
        sum(
            CASE WHEN inside THEN active_s * share ELSE 0 END
            + CASE WHEN carry_active_s > 0 THEN moved_s ELSE 0 END
        ) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS active_gpu_h,
        sum(
            CASE WHEN inside THEN idle_s * share ELSE 0 END
            + CASE WHEN carry_idle_s > 0 THEN moved_s ELSE 0 END
        ) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS idle_allocated_gpu_h,
        sum(CASE WHEN inside THEN observed_s * share ELSE 0 END + moved_s)
            FILTER (WHERE job_id IS NULL) / 3600.0 AS unallocated_gpu_h,
        sum(
            CASE WHEN inside THEN effective_s * share ELSE 0 END
            + coalesce(carry_busy, 0) * moved_s
        ) FILTER (WHERE job_id IS NOT NULL) / 3600.0 AS effective_gpu_h,
        sum(energy_j) FILTER (WHERE inside) / 3600000.0 AS energy_kwh,
        count(DISTINCT job_id) FILTER (WHERE inside OR moved_s > 0) AS jobs
    FROM rows, edges AS e
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
