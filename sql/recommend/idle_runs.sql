-- idle_runs: every stretch in which all of a job's GPUs were idle, for replaying idle-cancel policies.
--
-- Grain:   one row per (cluster, job_id, run) of consecutive fully idle buckets
-- Reads:   gpu_job_buckets, jobs_latest, data_extent
-- Params:
--   $since     inclusive lower bound on job start (TIMESTAMP, UTC)
--   $until     exclusive upper bound on job start
--   $bucket_s  width of the gpu_job_buckets mart in seconds (attribute --bucket, default 300)
-- Returns: cluster, job_id, user, account, partition, interactive, gpus, job_start_e, job_end_e,
--          run_start_e, run_end_e, last_active_e
--
-- A bucket is fully idle for a job when its GPUs were observed in it, none was active
-- (DESIGN §4: active = observed and busy >= idle threshold) and none showed GPU utilization
-- (mean GPU_UTIL of 1 % or more in the bucket): the policy replayed is Job Defense Shield's
-- cancel-zero-gpu-jobs, which reads utilization, so a hung GPU (GPU_UTIL high, SM activity
-- ~0) is never idle to it and is not replayed as cancelled. A GPU that reports no GPU_UTIL
-- falls back to busy. Runs are clipped to the job's
-- span; a job still running ends at the end of its cluster's data. last_active_e is the end
-- of the job's last bucket with any active GPU (null when it never was active), so a policy
-- that cancels at t kills a job that would have worked again when last_active_e > t.

-- (the end of the data every rule reads: raw samples' ts + interval_s took one sample's 1e8 s
-- interval for the end, and a running idle job freed 27,778 GPU-hours)
WITH data_end AS (
    SELECT
        cluster,
        epoch(data_end) AS end_e
    FROM data_extent
),
window_jobs AS (
    SELECT
        j.cluster,
        j.job_id,
        j.user,
        j.account,
        j.partition,
        coalesce(j.interactive, false) AS interactive,
        coalesce(j.gpus, 1) AS gpus,
        epoch(j.start_ts) AS job_start_e,
        coalesce(epoch(j.end_ts), e.end_e, epoch(j.start_ts)) AS job_end_e
    FROM jobs_latest AS j
    LEFT JOIN data_end AS e
        ON e.cluster = j.cluster
    WHERE j.start_ts >= $since AND j.start_ts < $until
),
job_buckets AS (
    SELECT
        b.cluster,
        b.job_id,
        epoch(b.bucket) AS bucket_e,
        sum(b.observed_s) AS observed_s,
        sum(b.active_s) AS active_s,
        count(*) FILTER (WHERE b.util_known_s > 0 AND b.util_sum / b.util_known_s >= 1.0)
            AS utilized_gpus
    FROM gpu_job_buckets AS b
    WHERE b.job_id IS NOT NULL
    GROUP BY b.cluster, b.job_id, b.bucket
),
idle_buckets AS (
    SELECT
        cluster,
        job_id,
        bucket_e,
        bucket_e / $bucket_s
            - row_number() OVER (PARTITION BY cluster, job_id ORDER BY bucket_e) AS run
    FROM job_buckets
    WHERE observed_s > 0 AND active_s = 0 AND utilized_gpus = 0
),
runs AS (
    SELECT
        cluster,
        job_id,
        min(bucket_e) AS run_start_e,
        max(bucket_e) + $bucket_s AS run_end_e
    FROM idle_buckets
    GROUP BY cluster, job_id, run
),
last_active AS (
    SELECT
        cluster,
        job_id,
        max(bucket_e) + $bucket_s AS last_active_e
    FROM job_buckets
    WHERE active_s > 0
    GROUP BY cluster, job_id
)
SELECT
    w.cluster,
    w.job_id,
    w.user,
    w.account,
    w.partition,
    w.interactive,
    w.gpus,
    w.job_start_e,
    w.job_end_e,
    greatest(r.run_start_e, w.job_start_e) AS run_start_e,
    least(r.run_end_e, w.job_end_e) AS run_end_e,
    -- least() skips nulls: a job that was never active must keep a null here
    CASE WHEN a.last_active_e IS NOT NULL THEN least(a.last_active_e, w.job_end_e) END
        AS last_active_e
FROM runs AS r
JOIN window_jobs AS w
    ON w.cluster = r.cluster AND w.job_id = r.job_id
LEFT JOIN last_active AS a
    ON a.cluster = r.cluster AND a.job_id = r.job_id
ORDER BY w.cluster, w.job_id, run_start_e
