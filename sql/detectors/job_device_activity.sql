-- job_device_activity: what each GPU of each job did over the job's life (from the daily mart).
--
-- Grain:   one row per (cluster, job_id, device, mig_instance)
-- Reads:   job_gpu_daily, jobs_latest, job_gpus
-- Params:
--   $since  ignore days before the UTC date of this time (TIMESTAMP, UTC)
-- Returns: cluster, job_id, user, account, job_start_ts, job_end_ts, gpus, device, mig_instance,
--          node, gpu_index, gpu_uuid, observed_s, active_s, idle_s, busy_mean, sm_mean
--
-- busy_mean is the time-weighted mean busy fraction (DESIGN §4) over the samples that carry it.
-- job_start_ts is the scheduler record's start, else its first allocation's: a finding's id
-- hashes it, and a record that lands after the samples must not make the finding anew.

SELECT
    d.cluster,
    d.job_id,
    j.user,
    j.account,
    coalesce(j.start_ts, h.start_ts) AS job_start_ts,
    j.end_ts AS job_end_ts,
    j.gpus,
    d.device,
    d.mig_instance,
    any_value(d.node) AS node,
    any_value(d.gpu_index) AS gpu_index,
    any_value(d.gpu_uuid) AS gpu_uuid,
    sum(d.observed_s) AS observed_s,
    sum(d.active_s) AS active_s,
    sum(d.idle_s) AS idle_s,
    sum(d.effective_s) / nullif(sum(d.busy_known_s), 0) AS busy_mean,
    sum(d.sm_sum) / nullif(sum(d.sm_known_s), 0) AS sm_mean
FROM job_gpu_daily AS d
LEFT JOIN jobs_latest AS j
    ON j.cluster = d.cluster AND j.job_id = d.job_id
LEFT JOIN (
    SELECT
        cluster,
        job_id,
        min(start_ts) AS start_ts
    FROM job_gpus
    GROUP BY cluster, job_id
) AS h
    ON h.cluster = d.cluster AND h.job_id = d.job_id
WHERE d.date >= CAST($since AS DATE)
GROUP BY
    d.cluster,
    d.job_id,
    j.user,
    j.account,
    coalesce(j.start_ts, h.start_ts),
    j.end_ts,
    j.gpus,
    d.device,
    d.mig_instance
ORDER BY d.cluster, d.job_id, d.device, d.mig_instance
