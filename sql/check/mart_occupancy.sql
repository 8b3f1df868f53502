-- mart_occupancy: every occupancy bucket splits the fleet exactly: allocated + unallocated +
-- unobserved GPUs = the GPUs in service, none negative, active + idle within allocated.
--
-- Grain:   one row per cluster_occupancy bucket that breaks the split
-- Reads:   cluster_occupancy
-- Params:  none
-- Returns: cluster, subject, detail

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
ORDER BY cluster, bucket
