-- job_power: per job of the window, its SM activity, power draw and the board's power limit.
--
-- Grain:   one row per (cluster, job_id) with telemetry that started in [$since, $until)
-- Reads:   job_gpu_daily, jobs_latest, gpu_models
-- Params:
--   $since  inclusive lower bound on job start (TIMESTAMP, UTC)
--   $until  exclusive upper bound on job start
-- Returns: cluster, job_id, partition, observed_gpu_h, sm_active_mean, power_w_mean,
--          power_limit_w, energy_kwh, nodes
--
-- Means are time-weighted over the samples that carry the field. power_limit_w is the
-- largest board limit among the job's GPU models (700 W where the model is unknown).
-- nodes lists the job's nodes, comma-separated.

SELECT
    d.cluster,
    d.job_id,
    any_value(j.partition) AS partition,
    sum(d.observed_s) / 3600.0 AS observed_gpu_h,
    sum(d.sm_sum) / nullif(sum(d.sm_known_s), 0) AS sm_active_mean,
    sum(d.power_sum) / nullif(sum(d.power_known_s), 0) AS power_w_mean,
    coalesce(max(m.power_limit_w), 700) AS power_limit_w,
    sum(d.energy_j) / 3600000.0 AS energy_kwh,
    string_agg(DISTINCT d.node, ',' ORDER BY d.node) AS nodes
FROM job_gpu_daily AS d
JOIN jobs_latest AS j
    ON j.cluster = d.cluster AND j.job_id = d.job_id
LEFT JOIN gpu_models AS m
    ON m.model = d.model
WHERE j.start_ts >= $since AND j.start_ts < $until
GROUP BY d.cluster, d.job_id
ORDER BY d.cluster, d.job_id
