-- mart_totals: the marts count each cluster's GPU time once: per job, active + idle =
-- observed; per cluster, the daily and per-GPU marts add up to job_usage, and the per-bucket
-- occupancy to the jobs' buckets counted in physical GPUs (gpu_job_buckets' share-weighted
-- seconds: a MIG instance is its share of its GPU there, one of the job's GPUs in job_usage).
--
-- Grain:   one row per job or cluster whose totals disagree
-- Reads:   job_usage, usage_daily, job_gpu_daily, bucket_occupancy, gpu_job_buckets
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
physical AS (
    SELECT
        cluster,
        sum(observed_share_s) / 3600.0 AS observed_h,
        sum(idle_share_s) / 3600.0 AS idle_h
    FROM gpu_job_buckets
    WHERE job_id IS NOT NULL
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
    SELECT
        u.cluster,
        'usage_daily' AS mart,
        'alloc' AS figure,
        u.alloc_h AS want,
        d.alloc_h AS got,
        'job_usage''s' AS source
    FROM usage AS u LEFT JOIN daily AS d ON d.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'usage_daily', 'observed', u.observed_h, d.observed_h, 'job_usage''s'
    FROM usage AS u LEFT JOIN daily AS d ON d.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'usage_daily', 'idle', u.idle_h, d.idle_h, 'job_usage''s'
    FROM usage AS u LEFT JOIN daily AS d ON d.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'job_gpu_daily', 'observed', u.observed_h, g.observed_h, 'job_usage''s'
    FROM usage AS u LEFT JOIN per_gpu AS g ON g.cluster = u.cluster
    UNION ALL
    SELECT u.cluster, 'job_gpu_daily', 'idle', u.idle_h, g.idle_h, 'job_usage''s'
    FROM usage AS u LEFT JOIN per_gpu AS g ON g.cluster = u.cluster
    UNION ALL
    SELECT
        p.cluster,
        'bucket_occupancy',
        'allocated (observed)',
        p.observed_h,
        b.observed_h,
        'the jobs'' buckets'''
    FROM physical AS p LEFT JOIN buckets AS b ON b.cluster = p.cluster
    UNION ALL
    SELECT p.cluster, 'bucket_occupancy', 'idle', p.idle_h, b.idle_h, 'the jobs'' buckets'''
    FROM physical AS p LEFT JOIN buckets AS b ON b.cluster = p.cluster
)
SELECT cluster, subject, detail
FROM per_job
UNION ALL
SELECT
    cluster,
    mart || ' totals' AS subject,
    printf(
        '%s GPU-h %.4f differ from %s %.4f',
        figure,
        coalesce(got, 0.0),
        source,
        coalesce(want, 0.0)
    ) AS detail
FROM pairs
WHERE abs(coalesce(got, 0.0) - coalesce(want, 0.0))
    > 1e-6 * greatest(abs(coalesce(want, 0.0)), abs(coalesce(got, 0.0))) + 1e-6
ORDER BY cluster, subject, detail
