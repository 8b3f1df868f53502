-- usage_windows: GPU-hours allocated, observed, idle and effective per cluster, account and
-- partition over the last $windows_s seconds of each cluster's data (`gpuledger serve`).
--
-- Grain:   one row per (cluster, account, partition, window_s) that held GPUs in the window
-- Reads:   cluster_data_end, job_gpu_shares, gpu_job_buckets, jobs_latest
-- Params:
--   $windows_s  the window lengths in seconds (BIGINT[], e.g. [86400, 604800])
--   $bucket_s   the bucket width gpu_job_buckets was built with, in seconds
-- Returns: cluster, account, partition, window_s, window_start, window_end, allocated_gpu_h,
--          observed_gpu_h, idle_gpu_h, effective_gpu_h
--
-- A window ends at the end of its cluster's data (cluster_data_end: its telemetry's, where the
-- allocations still open are cut, else its scheduler's records'; a poll after the last sample
-- moved the window past them and left its last part without allocations), never at the wall
-- clock, and starts at the first bucket boundary at or after that end - window_s, so
-- allocations (cut exactly there) and sample buckets (whole buckets) cover the same span. Allocated time is
-- split among jobs sharing a GPU (job_gpu_shares), as in usage_daily. A job the scheduler never
-- reported has a null account and partition.

WITH windows AS (
    SELECT
        e.cluster,
        w.window_s,
        ceil((e.end_e - w.window_s) / $bucket_s) * $bucket_s AS start_e,
        e.end_e
    FROM cluster_data_end AS e,
        unnest($windows_s) AS w(window_s)
),
allocated AS (
    SELECT
        w.cluster,
        w.window_s,
        s.job_id,
        sum(
            greatest(least(s.end_e, w.end_e) - greatest(s.start_e, w.start_e), 0)
            * s.gpus * s.share
        ) AS allocated_s
    FROM job_gpu_shares AS s
    JOIN windows AS w
        ON w.cluster = s.cluster AND s.end_e > w.start_e AND s.start_e < w.end_e
    GROUP BY w.cluster, w.window_s, s.job_id
),
used AS (
    SELECT
        w.cluster,
        w.window_s,
        b.job_id,
        sum(b.observed_s) AS observed_s,
        sum(b.idle_s) AS idle_s,
        sum(b.effective_s) AS effective_s
    FROM gpu_job_buckets AS b
    JOIN windows AS w
        ON w.cluster = b.cluster AND epoch(b.bucket) >= w.start_e
    WHERE b.job_id IS NOT NULL
    GROUP BY w.cluster, w.window_s, b.job_id
),
per_job AS (
    SELECT
        coalesce(a.cluster, u.cluster) AS cluster,
        coalesce(a.window_s, u.window_s) AS window_s,
        coalesce(a.job_id, u.job_id) AS job_id,
        coalesce(a.allocated_s, 0) AS allocated_s,
        coalesce(u.observed_s, 0) AS observed_s,
        coalesce(u.idle_s, 0) AS idle_s,
        coalesce(u.effective_s, 0) AS effective_s
    FROM allocated AS a
    FULL OUTER JOIN used AS u
        ON u.cluster = a.cluster AND u.window_s = a.window_s AND u.job_id = a.job_id
)
SELECT
    p.cluster,
    j.account,
    j.partition,
    p.window_s,
    to_timestamp(w.start_e) AS window_start,
    to_timestamp(w.end_e) AS window_end,
    sum(p.allocated_s) / 3600.0 AS allocated_gpu_h,
    sum(p.observed_s) / 3600.0 AS observed_gpu_h,
    sum(p.idle_s) / 3600.0 AS idle_gpu_h,
    sum(p.effective_s) / 3600.0 AS effective_gpu_h
FROM per_job AS p
JOIN windows AS w
    ON w.cluster = p.cluster AND w.window_s = p.window_s
LEFT JOIN jobs_latest AS j
    ON j.cluster = p.cluster AND j.job_id = p.job_id
GROUP BY p.cluster, j.account, j.partition, p.window_s, w.start_e, w.end_e
ORDER BY p.cluster, j.account NULLS LAST, j.partition NULLS LAST, p.window_s
