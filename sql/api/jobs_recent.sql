-- jobs_recent: the last jobs started in a window, newest first, for the HTTP API's job list.
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   jobs_latest, job_usage, cluster_data_end
-- Params:
--   $cluster  only this cluster, or NULL for every cluster
--   $user     only this user's jobs, or NULL for everyone's
--             (a user name matches in any case, as the API's viewers are named)
--   $start    only jobs running after this, or starting at or after it (one that ran before and ended at it ran none of the window) (TIMESTAMP WITH TIME ZONE, UTC)
--   $end      only jobs started (or, never started, submitted) before this
--   $limit    at most this many rows
-- Returns: cluster, job_id, job_name, user, account, partition, state, gpus, submit_ts,
--          start_ts, end_ts, runtime_s, alloc_gpu_h, active_gpu_h, idle_gpu_h, busy_mean,
--          energy_kwh
--
-- runtime_s runs to end_ts, or, for a job still running, to the later of the end of its
-- cluster's data (cluster_data_end) and its record's last collection, as jobs/job_detail counts
-- it (its GPU-hours ÷ GPUs stopped at the telemetry's end, and counted a requeued job's earlier
-- runs). Jobs without GPU telemetry have NULL usage.

SELECT
    j.cluster,
    j.job_id,
    j.job_name,
    j.user,
    j.account,
    j.partition,
    split_part(j.state, ' ', 1) AS state,
    coalesce(j.gpus, u.gpus) AS gpus,
    j.submit_ts,
    j.start_ts,
    j.end_ts,
    CASE
        WHEN j.end_ts IS NOT NULL THEN epoch(j.end_ts) - epoch(j.start_ts)
        WHEN j.start_ts IS NOT NULL
            THEN greatest(
                coalesce(d.end_e, epoch(j.updated_ts)),
                epoch(j.updated_ts),
                epoch(j.start_ts)  -- (a job that started after the data's end ran no time yet)
            )
                - epoch(j.start_ts)
    END AS runtime_s,
    u.alloc_gpu_h,
    u.active_gpu_h,
    u.idle_gpu_h,
    u.busy_mean,
    u.energy_kwh
FROM jobs_latest AS j
LEFT JOIN job_usage AS u
    ON u.cluster = j.cluster AND u.job_id = j.job_id
LEFT JOIN cluster_data_end AS d
    ON d.cluster = j.cluster
WHERE ($cluster IS NULL OR j.cluster = $cluster)
    AND ($user IS NULL OR lower(j.user) = lower($user))
    AND (j.end_ts IS NULL OR j.end_ts > $start OR j.start_ts >= $start)
    AND coalesce(j.start_ts, j.submit_ts) < $end
ORDER BY coalesce(j.start_ts, j.submit_ts) DESC, j.cluster, j.job_id
LIMIT $limit
