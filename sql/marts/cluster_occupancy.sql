-- cluster_occupancy: how many GPUs were allocated, active, idle-allocated, unallocated and
-- unobserved, on average over each time bucket.
--
-- Grain:   one row per (cluster, bucket)
-- Reads:   gpu_job_buckets, gpus
-- Params:
--   $bucket_s  the bucket width gpu_job_buckets was built with, in seconds
-- Returns: cluster, bucket, gpus_total, gpus_allocated, gpus_active, gpus_idle_allocated,
--          gpus_unallocated, gpus_unobserved
--
-- The part of a sample's span that runs past its bucket's end is moved to the next bucket, so
-- every observed GPU-second lands in exactly one bucket. gpus_total counts physical GPUs (the
-- inventory, or the devices seen if more); MIG instances count as their share of one GPU.
-- Buckets are clipped to the span of the cluster's data, so the first and last are not diluted;
-- allocated + unallocated + unobserved = total in every bucket.

WITH moved AS (
    SELECT
        cluster,
        bucket,
        job_id IS NOT NULL AS allocated,
        (observed_s - carry_s) * share AS observed_s,
        (active_s - carry_active_s) * share AS active_s,
        (idle_s - carry_idle_s) * share AS idle_s
    FROM gpu_job_buckets
    UNION ALL
    SELECT
        cluster,
        bucket + to_seconds($bucket_s) AS bucket,
        job_id IS NOT NULL AS allocated,
        carry_s * share AS observed_s,
        carry_active_s * share AS active_s,
        carry_idle_s * share AS idle_s
    FROM gpu_job_buckets
    WHERE carry_s > 0
),
per_bucket AS (
    SELECT
        cluster,
        bucket,
        coalesce(sum(observed_s) FILTER (WHERE allocated), 0) AS allocated_s,
        coalesce(sum(active_s) FILTER (WHERE allocated), 0) AS active_s,
        coalesce(sum(idle_s) FILTER (WHERE allocated), 0) AS idle_s,
        coalesce(sum(observed_s) FILTER (WHERE NOT allocated), 0) AS unallocated_s
    FROM moved
    GROUP BY cluster, bucket
),
data_span AS (
    SELECT
        cluster,
        min(first_e) AS first_e,
        max(last_end_e) AS last_e,
        count(DISTINCT device) AS devices
    FROM gpu_job_buckets
    GROUP BY cluster
),
fleet AS (
    SELECT
        d.cluster,
        d.first_e,
        d.last_e,
        greatest(d.devices, coalesce(i.gpus, 0)) AS gpus_total
    FROM data_span AS d
    LEFT JOIN (
        SELECT
            cluster,
            count(DISTINCT coalesce(gpu_uuid, node || '/' || CAST(gpu_index AS VARCHAR))) AS gpus
        FROM gpus
        GROUP BY cluster
    ) AS i
        ON i.cluster = d.cluster
),
sized AS (
    SELECT
        p.cluster,
        p.bucket,
        p.allocated_s,
        p.active_s,
        p.idle_s,
        p.unallocated_s,
        f.gpus_total,
        least(epoch(p.bucket) + $bucket_s, f.last_e) - greatest(epoch(p.bucket), f.first_e)
            AS width_s
    FROM per_bucket AS p
    JOIN fleet AS f
        ON f.cluster = p.cluster
)
SELECT
    cluster,
    bucket,
    CAST(gpus_total AS DOUBLE) AS gpus_total,
    allocated_s / width_s AS gpus_allocated,
    active_s / width_s AS gpus_active,
    idle_s / width_s AS gpus_idle_allocated,
    unallocated_s / width_s AS gpus_unallocated,
    gpus_total - (allocated_s + unallocated_s) / width_s AS gpus_unobserved
FROM sized
WHERE width_s > 0
ORDER BY cluster, bucket
