-- job_early_usage: what each job's GPUs did in its first $minutes minutes.
--
-- Grain:   one row per job with telemetry in that window (cluster, job_id)
-- Reads:   jobs_latest, gpu_job_buckets
-- Params:
--   $minutes     the window from the job's start, in minutes (e.g. 15 or 30)
-- Returns: cluster, job_id, early_observed_s, early_busy, early_idle_frac, early_sm,
--          early_fb_mib_max, early_devices, early_devices_active
--
-- Only 5-minute buckets whose last sample ends within the window count, so nothing after
-- minute $minutes leaks into a prediction made then.

SELECT
    b.cluster,
    b.job_id,
    sum(b.observed_s) AS early_observed_s,
    sum(b.effective_s) / nullif(sum(b.busy_known_s), 0) AS early_busy,
    sum(b.idle_s) / nullif(sum(b.observed_s), 0) AS early_idle_frac,
    sum(b.sm_sum) / nullif(sum(b.sm_known_s), 0) AS early_sm,
    max(b.fb_used_mib_max) AS early_fb_mib_max,
    count(DISTINCT b.device) AS early_devices,
    count(DISTINCT b.device) FILTER (WHERE b.active_s > 0) AS early_devices_active
FROM gpu_job_buckets AS b
JOIN jobs_latest AS j
    ON j.cluster = b.cluster AND j.job_id = b.job_id
WHERE b.last_end_e <= epoch(j.start_ts) + $minutes * 60
GROUP BY b.cluster, b.job_id
ORDER BY b.cluster, b.job_id
