-- mart_occupancy: every occupancy bucket splits the fleet exactly: allocated + unallocated +
-- unobserved GPUs = the GPUs in service, none negative, active + idle within allocated; the
-- GPUs in service are the fleet's (the inventory, or the devices seen if more), and every
-- bucket of the data's span is there.
--
-- Grain:   one row per cluster_occupancy bucket that breaks the split, or states another
--          fleet, and one per hole in a cluster's buckets
-- Reads:   cluster_occupancy, gpu_job_buckets, gpus
-- Params:  none
-- Returns: cluster, subject, detail
--
-- The fleet as sql/marts/cluster_occupancy.sql counts it. The bucket width is the least step
-- between two buckets of the cluster: a step longer than it is a hole, and so is a first or
-- last bucket other than the ones the first and last samples lie in.

WITH fleet AS (
    SELECT
        d.cluster,
        d.first_e,
        d.last_e,
        greatest(d.devices, coalesce(i.gpus, 0)) AS gpus
    FROM (
        SELECT
            cluster,
            min(first_e) AS first_e,
            max(last_end_e) AS last_e,
            count(DISTINCT device) AS devices
        FROM gpu_job_buckets
        GROUP BY cluster
    ) AS d
    LEFT JOIN (
        SELECT
            cluster,
            count(DISTINCT coalesce(gpu_uuid, node || '/' || CAST(gpu_index AS VARCHAR))) AS gpus
        FROM gpus
        GROUP BY cluster
    ) AS i
        ON i.cluster = d.cluster
),
steps AS (
    SELECT
        cluster,
        bucket,
        epoch(bucket) AS bucket_e,
        epoch(bucket) - lag(epoch(bucket)) OVER (PARTITION BY cluster ORDER BY bucket) AS step_s
    FROM cluster_occupancy
),
widths AS (
    SELECT
        cluster,
        min(step_s) AS bucket_s,
        min(bucket_e) AS first_bucket_e,
        max(bucket_e) AS last_bucket_e
    FROM steps
    GROUP BY cluster
)
SELECT
    cluster,
    'cluster_occupancy bucket ' || strftime(bucket AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M') AS subject,
    printf(
        'allocated %.4f + unallocated %.4f + unobserved %.4f GPUs (active %.4f, idle %.4f) '
        'do not split the %.4f GPUs in service',
        gpus_allocated,
        gpus_unallocated,
        gpus_unobserved,
        gpus_active,
        gpus_idle_allocated,
        gpus_total
    ) AS detail
FROM cluster_occupancy
WHERE abs(gpus_allocated + gpus_unallocated + gpus_unobserved - gpus_total) > 1e-6
    OR least(gpus_allocated, gpus_unallocated, gpus_unobserved, gpus_active,
        gpus_idle_allocated) < -1e-9
    OR gpus_active + gpus_idle_allocated > gpus_allocated + 1e-6
UNION ALL
SELECT
    o.cluster,
    'cluster_occupancy bucket ' || strftime(o.bucket AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M'),
    printf('%.4f GPUs in service, where the fleet has %d', o.gpus_total, f.gpus)
FROM cluster_occupancy AS o
JOIN fleet AS f
    ON f.cluster = o.cluster
WHERE abs(o.gpus_total - f.gpus) > 1e-6
UNION ALL
SELECT
    s.cluster,
    'cluster_occupancy bucket ' || strftime(s.bucket AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M'),
    printf(
        'no bucket in the %.0f s before it (buckets of %.0f s)', s.step_s - w.bucket_s, w.bucket_s
    )
FROM steps AS s
JOIN widths AS w
    ON w.cluster = s.cluster
WHERE s.step_s > w.bucket_s
UNION ALL
SELECT
    w.cluster,
    'cluster_occupancy of ' || w.cluster,
    'its buckets run from '
        || strftime(to_timestamp(w.first_bucket_e) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M')
        || ' to ' || strftime(to_timestamp(w.last_bucket_e) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M')
        || ', where its samples run from '
        || strftime(to_timestamp(f.first_e) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S')
        || ' to ' || strftime(to_timestamp(f.last_e) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S')
FROM widths AS w
JOIN fleet AS f
    ON f.cluster = w.cluster
WHERE w.bucket_s IS NOT NULL
    AND (
        w.first_bucket_e <> floor(f.first_e / w.bucket_s) * w.bucket_s
        OR w.last_bucket_e + w.bucket_s < f.last_e
    )
ORDER BY 1, 2
