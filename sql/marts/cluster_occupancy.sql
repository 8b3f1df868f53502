-- cluster_occupancy: how many GPUs were allocated, active, idle-allocated, unallocated and
-- unobserved, on average over each time bucket.
--
-- Grain:   one row per (cluster, bucket)
-- Reads:   bucket_occupancy, gpu_job_buckets, gpus
-- Params:
--   $bucket_s  the bucket width gpu_job_buckets was built with, in seconds
-- Returns: cluster, bucket, gpus_total, gpus_allocated, gpus_active, gpus_idle_allocated,
--          gpus_unallocated, gpus_unobserved
--
-- Sums the per-day partials of bucket_occupancy (where the part of a sample's span that runs
-- past its bucket's end was moved to the buckets it covers, also across midnight), so every
-- observed GPU-second lands in the bucket it was in. Every bucket of the data's span has a row,
-- also one where no GPU reported (all unobserved). gpus_total counts physical GPUs (the
-- inventory, or the devices seen if more); MIG instances count as their share of one GPU.
-- Buckets are clipped to the span of the cluster's data, so the first and last are not diluted;
-- allocated + unallocated + unobserved = total in every bucket.

WITH per_bucket AS (
    SELECT
        cluster,
        bucket,
        sum(allocated_s) AS allocated_s,
        sum(active_s) AS active_s,
        sum(idle_s) AS idle_s,
        sum(unallocated_s) AS unallocated_s
    FROM bucket_occupancy
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
grid AS (
    SELECT
        f.cluster,
        to_timestamp(g.bucket_n * $bucket_s) AS bucket,
        f.first_e,
        f.last_e,
        f.gpus_total
    FROM fleet AS f,
        unnest(generate_series(
            CAST(floor(f.first_e / $bucket_s) AS BIGINT),
            CAST(ceil(f.last_e / $bucket_s) AS BIGINT) - 1
        )) AS g(bucket_n)
),
sized AS (
    SELECT
        g.cluster,
        g.bucket,
        coalesce(p.allocated_s, 0) AS allocated_s,
        coalesce(p.active_s, 0) AS active_s,
        coalesce(p.idle_s, 0) AS idle_s,
        coalesce(p.unallocated_s, 0) AS unallocated_s,
        g.gpus_total,
        least(epoch(g.bucket) + $bucket_s, g.last_e) - greatest(epoch(g.bucket), g.first_e)
            AS width_s
    FROM grid AS g
    LEFT JOIN per_bucket AS p
        ON p.cluster = g.cluster
        AND p.bucket = g.bucket
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
