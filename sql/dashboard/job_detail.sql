-- job_detail: everything the job page says about one job in one row.
--
-- Grain:   one row (none when the job is unknown or not the viewer's): the job's record and
--          its usage, or either alone (a job that never started has no usage; one an exporter
--          label names may have no record)
-- Reads:   job_usage, jobs_latest, job_outcomes, cluster_data_end (where its allocation runs
--          to), job_gpus (the nodes of its allocations)
-- Params:
--   $cluster  the cluster
--   $job_id   the job
--   $viewer   only if it is this user's job, or NULL for anyone's
--             (a user name matches in any case)
-- Returns: job_id, job_name, user, account, partition, qos, state, outcome, gpus, gpu_type,
--          nodes, cpus, mem_req_mib, submit_ts, start_ts, end_ts, wait_h, runtime_h,
--          time_limit_h, alloc_gpu_h, observed_gpu_h, active_gpu_h, idle_gpu_h,
--          effective_gpu_h, busy_mean, gpu_util_pct_mean, sm_active_mean, tensor_active_mean,
--          dram_active_mean, fb_used_mib_max, energy_kwh, kg_co2e, co2e_fallback_hours,
--          power_w_mean, est_tflops_mean,
--          gpus_never_active, gpu_h_lost, gpu_h_lost_requeue, hw_event_before_end, shared,
--          source, model_params, tokens_per_s_per_gpu, mfu
--
-- gpu_h_lost: all the job lost (job_outcomes), of which gpu_h_lost_requeue to runs before a
-- requeue. As `gpuledger job` (sql/jobs/job_detail.sql): a running job's run time runs to the
-- end of its cluster's data (cluster_data_end: its samples', else its scheduler's records'),
-- where its allocation runs to (or its record's last change, if later; never before its
-- start), and a record without its node list shows the nodes its allocations name.

WITH record AS (
    SELECT *
    FROM jobs_latest
    WHERE cluster = $cluster AND job_id = $job_id
),
usage AS (
    SELECT *
    FROM job_usage
    WHERE cluster = $cluster AND job_id = $job_id
),
seen AS (
    SELECT max(end_e) AS last_e
    FROM cluster_data_end
    WHERE cluster = $cluster
),
allocated AS (
    SELECT list(DISTINCT node ORDER BY node) AS nodes
    FROM job_gpus
    WHERE cluster = $cluster AND job_id = $job_id AND node IS NOT NULL
)
SELECT
    coalesce(u.job_id, j.job_id) AS job_id,
    j.job_name,
    coalesce(u.user, j.user) AS user,
    coalesce(u.account, j.account) AS account,
    coalesce(u.partition, j.partition) AS partition,
    j.qos,
    coalesce(u.state, j.state) AS state,
    o.outcome,
    coalesce(u.gpus, j.gpus) AS gpus,
    j.gpu_type,
    array_to_string(CASE WHEN len(j.nodes) > 0 THEN j.nodes ELSE a.nodes END, ', ') AS nodes,
    j.cpus,
    j.mem_req_mib,
    j.submit_ts,
    coalesce(u.start_ts, j.start_ts) AS start_ts,
    coalesce(u.end_ts, j.end_ts) AS end_ts,
    (epoch(coalesce(u.start_ts, j.start_ts)) - epoch(j.submit_ts)) / 3600.0 AS wait_h,
    (
        coalesce(
            epoch(coalesce(u.end_ts, j.end_ts)),
            greatest(
                coalesce(s.last_e, epoch(j.updated_ts)),
                epoch(j.updated_ts),
                epoch(coalesce(u.start_ts, j.start_ts))  -- (started after the data's end)
            )
        ) - epoch(coalesce(u.start_ts, j.start_ts))
    ) / 3600.0 AS runtime_h,
    j.time_limit_s / 3600.0 AS time_limit_h,
    u.alloc_gpu_h,
    u.observed_gpu_h,
    u.active_gpu_h,
    u.idle_gpu_h,
    u.effective_gpu_h,
    u.busy_mean,
    u.gpu_util_pct_mean,
    u.sm_active_mean,
    u.tensor_active_mean,
    u.dram_active_mean,
    u.fb_used_mib_max,
    u.energy_kwh,
    u.kg_co2e,
    u.co2e_fallback_hours,
    u.power_w_mean,
    u.est_tflops_mean,
    u.gpus_never_active,
    o.gpu_h_lost,
    o.gpu_h_lost_requeue,
    o.hw_event_before_end,
    coalesce(u.shared, FALSE) AS shared,
    j.source,
    u.model_params,
    u.tokens_per_s_per_gpu,
    u.mfu
FROM usage AS u
FULL OUTER JOIN record AS j
    ON TRUE  -- one row at most each: the job's
LEFT JOIN job_outcomes AS o
    ON o.cluster = $cluster
    AND o.job_id = $job_id
CROSS JOIN seen AS s
CROSS JOIN allocated AS a
WHERE $viewer IS NULL OR lower(coalesce(u.user, j.user)) = lower($viewer)
