-- job_features: what was known of each started job at submission, and how its run went.
--
-- Grain:   one row per started job (cluster, job_id)
-- Reads:   jobs_latest, gpu_job_buckets
-- Params:
--   $busy_below  a 5-minute stretch of a job is low-busy when its busy fraction is below this
-- Returns: cluster, job_id, user, account, partition, job_name, state, submit_ts, start_ts,
--          end_ts, time_limit_s, gpus, runtime_s, observed_s, busy_mean, low_busy_frac
--
-- A job's 5-minute stretch is busy-weighted over all its GPUs: Σ effective_s / Σ observed_s.
-- low_busy_frac is the share of its observed stretches below $busy_below; the early-waste
-- model's label is low_busy_frac > 0.5 ("idle or below 20 % busy for most of its run").
-- runtime_s is null while the job runs.

WITH stretches AS (
    SELECT
        cluster,
        job_id,
        bucket,
        sum(observed_s) AS observed_s,
        sum(effective_s) AS effective_s
    FROM gpu_job_buckets
    WHERE job_id IS NOT NULL
    GROUP BY cluster, job_id, bucket
),
per_job AS (
    SELECT
        cluster,
        job_id,
        sum(observed_s) AS observed_s,
        sum(effective_s) / nullif(sum(observed_s), 0) AS busy_mean,
        avg(CASE WHEN effective_s < $busy_below * observed_s THEN 1.0 ELSE 0.0 END)
            FILTER (WHERE observed_s > 0) AS low_busy_frac
    FROM stretches
    GROUP BY cluster, job_id
)
SELECT
    j.cluster,
    j.job_id,
    j.user,
    j.account,
    j.partition,
    j.job_name,
    j.state,
    j.submit_ts,
    j.start_ts,
    j.end_ts,
    j.time_limit_s,
    j.gpus,
    epoch(j.end_ts) - epoch(j.start_ts) AS runtime_s,
    coalesce(p.observed_s, 0) AS observed_s,
    p.busy_mean,
    p.low_busy_frac
FROM jobs_latest AS j
LEFT JOIN per_job AS p
    ON p.cluster = j.cluster AND p.job_id = j.job_id
WHERE j.start_ts IS NOT NULL
ORDER BY j.cluster, j.start_ts, j.job_id
