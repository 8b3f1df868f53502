-- bucket_occupancy: allocated, active, idle and unallocated GPU-seconds per time bucket, as one
-- day's samples contribute them (the partials cluster_occupancy sums).
--
-- Grain:   one row per (cluster, date, bucket); date = the UTC day of the samples, bucket = the
--          bucket the time lands in (the first buckets of the next day for spans past midnight)
-- Reads:   gpu_job_buckets
-- Params:
--   $bucket_s  the bucket width gpu_job_buckets was built with, in seconds
-- Returns: cluster, date, bucket, allocated_s, active_s, idle_s, unallocated_s
--
-- The part of a sample's span that runs past its bucket's end is moved to the buckets it covers
-- (the next one, and more when the span is longer than a bucket). MIG instances count as their
-- share of one GPU. Built per day with gpu_job_buckets, so occupancy never re-reads samples.

WITH moved AS (
    SELECT
        cluster,
        date,
        bucket,
        job_id IS NOT NULL AS allocated,
        observed_share_s - carry_s * carry_share AS observed_s,
        active_share_s - carry_active_s * carry_share AS active_s,
        idle_share_s - carry_idle_s * carry_share AS idle_s
    FROM gpu_job_buckets
    UNION ALL
    -- Within one row only the device's last sample of the bucket can run past its end, so the
    -- carry is one stretch starting at the next bucket: bucket + n gets its n-th bucket_s of it.
    -- Nearly every carry fits in the next bucket (n = 1 only): those skip the series.
    SELECT
        b.cluster,
        b.date,
        to_timestamp(epoch(b.bucket) + $bucket_s) AS bucket,
        b.job_id IS NOT NULL AS allocated,
        least(greatest(b.carry_s, 0), $bucket_s) * b.carry_share AS observed_s,
        least(greatest(b.carry_active_s, 0), $bucket_s) * b.carry_share AS active_s,
        least(greatest(b.carry_idle_s, 0), $bucket_s) * b.carry_share AS idle_s
    FROM gpu_job_buckets AS b
    WHERE b.carry_s > 0 AND b.carry_s <= $bucket_s
    UNION ALL
    SELECT
        b.cluster,
        b.date,
        to_timestamp(epoch(b.bucket) + k.n * $bucket_s) AS bucket,
        b.job_id IS NOT NULL AS allocated,
        least(greatest(b.carry_s - (k.n - 1) * $bucket_s, 0), $bucket_s) * b.carry_share
            AS observed_s,
        least(greatest(b.carry_active_s - (k.n - 1) * $bucket_s, 0), $bucket_s) * b.carry_share
            AS active_s,
        least(greatest(b.carry_idle_s - (k.n - 1) * $bucket_s, 0), $bucket_s) * b.carry_share
            AS idle_s
    FROM gpu_job_buckets AS b,
        unnest(generate_series(1, CAST(ceil(b.carry_s / $bucket_s) AS BIGINT))) AS k(n)
    WHERE b.carry_s > $bucket_s
)
SELECT
    cluster,
    date,
    bucket,
    coalesce(sum(observed_s) FILTER (WHERE allocated), 0) AS allocated_s,
    coalesce(sum(active_s) FILTER (WHERE allocated), 0) AS active_s,
    coalesce(sum(idle_s) FILTER (WHERE allocated), 0) AS idle_s,
    coalesce(sum(observed_s) FILTER (WHERE NOT allocated), 0) AS unallocated_s
FROM moved
GROUP BY cluster, date, bucket
