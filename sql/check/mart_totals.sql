-- mart_totals: the marts count each cluster's GPU time once: per job, active + idle =
-- observed; per cluster, the daily, per-GPU and per-bucket marts add up to job_usage.
--
-- Grain:   one row per job or cluster whose totals disagree
-- Reads:   job_usage, usage_daily, job_gpu_daily, bucket_occupancy
-- Params:  none
-- Returns: cluster, subject, detail
--
-- Tolerance: 1e-6 of the larger figure plus 1e-6 GPU-h (floating-point sums).

WITH per_job AS (
    SELECT
        cluster,
        'job_usage row of job ' || job_id AS subject,
        printf(
            'active %.4f + idle %.4f GPU-h differ from observed %.4f GPU-h',
            active_gpu_h,
            idle_gpu_h,
            observed_gpu_h
        ) AS detail
    FROM job_usage
    WHERE abs(coalesce(active_gpu_h, 0) + coalesce(idle_gpu_h, 0) - coalesce(observed_gpu_h, 0))
        > 1e-6 * greatest(abs(observed_gpu_h), 1.0)
),
usage AS (
    SELECT
        cluster,
        sum(alloc_gpu_h) AS alloc_h,
        sum(observed_gpu_h) AS observed_h,
        sum(idle_gpu_h) AS idle_h
    FROM job_usage
    GROUP BY cluster
),
daily AS (
    SELECT
        cluster,
        sum(alloc_gpu_h) AS alloc_h,
        sum(observed_gpu_h) AS observed_h,
        sum(idle_gpu_h) AS idle_h
    FROM usage_daily
    GROUP BY cluster
),
per_gpu AS (
    SELECT
        cluster,
        sum(observed_s) / 3600.0 AS observed_h,
        sum(idle_s) / 3600.0 AS idle_h
    FROM job_gpu_daily
    GROUP BY cluster
),
buckets AS (
    SELECT
        cluster,
        sum(allocated_s) / 3600.0 AS observed_h,
        sum(idle_s) / 3600.0 AS idle_h
    FROM bucket_occupancy
    GROUP BY cluster
),
pairs AS (
    SELECT u.cluster, 'usage_daily' AS mart, 'alloc' AS figure, u.alloc_h AS want, d.alloc_h AS got
    FROM usage AS u LEFT JOIN daily AS d ON d.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'usage_daily', 'observed', u.observed_h, d.observed_h
    FROM usage AS u LEFT JOIN daily AS d ON d.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'usage_daily', 'idle', u.idle_h, d.idle_h
    FROM usage AS u LEFT JOIN daily AS d ON d.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'job_gpu_daily', 'observed', u.observed_h, g.observed_h
    FROM usage AS u LEFT JOIN per_gpu AS g ON g.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'job_gpu_daily', 'idle', u.idle_h, g.idle_h
    FROM usage AS u LEFT JOIN per_gpu AS g ON g.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'bucket_occupancy', 'allocated (observed)', u.observed_h, b.observed_h
    FROM usage AS u LEFT JOIN buckets AS b ON b.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'bucket_occupancy', 'idle', u.idle_h, b.idle_h
    FROM usage AS u LEFT JOIN buckets AS b ON b.cluster = u.cluster
)
SELECT cluster, subject, detail
FROM per_job
UNION ALL
SELECT
    cluster,
    mart || ' totals' AS subject,
    printf(
        '%s GPU-h %.4f differ from job_usage''s %.4f',
        figure,
        coalesce(got, 0.0),
        coalesce(want, 0.0)
    ) AS detail
FROM pairs
WHERE abs(coalesce(got, 0.0) - coalesce(want, 0.0))
    > 1e-6 * greatest(abs(coalesce(want, 0.0)), abs(coalesce(got, 0.0))) + 1e-6
ORDER BY cluster, subject, detail
