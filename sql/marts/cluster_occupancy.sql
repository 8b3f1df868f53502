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
-- The part of a sample's span that runs past its bucket's end is moved to the buckets it covers
-- (the next one, and more when the span is longer than a bucket), so every observed GPU-second
-- lands in the bucket it was in. Every bucket of the data's span has a row, also one where no GPU
-- reported (all unobserved). gpus_total counts physical GPUs (the
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
    -- Within one row only the device's last sample of the bucket can run past its end, so the
    -- carry is one stretch starting at the next bucket: bucket + n gets its n-th bucket_s of it.
    SELECT
        b.cluster,
        b.bucket + to_seconds(k.n * $bucket_s) AS bucket,
        b.job_id IS NOT NULL AS allocated,
        least(greatest(b.carry_s - (k.n - 1) * $bucket_s, 0), $bucket_s) * b.share AS observed_s,
        least(greatest(b.carry_active_s - (k.n - 1) * $bucket_s, 0), $bucket_s) * b.share
            AS active_s,
        least(greatest(b.carry_idle_s - (k.n - 1) * $bucket_s, 0), $bucket_s) * b.share AS idle_s
    FROM gpu_job_buckets AS b,
        unnest(generate_series(1, CAST(ceil(b.carry_s / $bucket_s) AS BIGINT))) AS k(n)
    WHERE b.carry_s > 0
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
