-- job_detail: one job's scheduler record and its usage summary, for `gpuledger job`.
--
-- Grain:   one row per cluster that has a job with this id
-- Reads:   jobs_latest, job_usage, job_outcomes, cluster_data_end (where its allocation ends),
--          job_gpus (the nodes of its allocations, where its record names none)
-- Params:
--   $job_id   the job id (Slurm array tasks as 1234_7)
--   $cluster  the cluster, or NULL for any
-- Returns: cluster, job_id, user, account, partition, qos, job_name, state, exit_code,
--          submit_ts, start_ts, end_ts, time_limit_s, gpus, gpus_requested, gpu_type, nodes,
--          cpus, mem_req_mib,
--          cpu_time_s, max_rss_mib, interactive, requeues, source, runtime_s, alloc_gpu_h,
--          observed_gpu_h, active_gpu_h, idle_gpu_h, effective_gpu_h, busy_mean,
--          gpu_util_pct_mean, sm_active_mean, tensor_active_mean, dram_active_mean,
--          fb_used_mib_max, energy_kwh, kg_co2e, co2e_fallback_hours, power_w_mean,
--          est_tflops_mean, nvlink_gb, pcie_gb,
--          gpus_never_active, samples, shared (GPU time split with other jobs: estimates),
--          hw_event_before_end, hw_event_kinds (a hardware event on its GPUs; NULL unbuilt),
--          model_params, tokens_per_s_per_gpu, mfu (what the job reported, and its MFU)
--
-- runtime_s runs from start_ts to end_ts, or while it is still running to the later of the
-- end of its cluster's data (cluster_data_end: where its allocation runs to in
-- job_gpu_intervals, so its allocated GPU-hours never exceed its GPUs × its run time) and its
-- record's last collection
-- (never a figure of its GPU-hours: those split a shared GPU, and count a requeued job's
-- earlier runs). Its own last sample's end made a job whose GPUs went silent show 2 h run
-- beside 5 GPU-hours allocated on 1 GPU.

-- the nodes its allocations name, for a record without its node list (another tool's, a
-- trace's): "Nodes: -" beside allocations on g002
WITH allocated AS (
    SELECT
        cluster,
        list(DISTINCT node ORDER BY node) AS nodes
    FROM job_gpus
    WHERE job_id = $job_id AND node IS NOT NULL
    GROUP BY cluster
)
SELECT
    j.cluster,
    j.job_id,
    j.user,
    j.account,
    j.partition,
    j.qos,
    j.job_name,
    j.state,
    j.exit_code,
    j.submit_ts,
    j.start_ts,
    j.end_ts,
    j.time_limit_s,
    coalesce(j.gpus, u.gpus) AS gpus,
    j.gpus_requested,
    j.gpu_type,
    CASE WHEN len(j.nodes) > 0 THEN j.nodes ELSE a.nodes END AS nodes,
    j.cpus,
    j.mem_req_mib,
    j.cpu_time_s,
    j.max_rss_mib,
    j.interactive,
    j.requeues,
    j.source,
    CASE
        WHEN j.end_ts IS NOT NULL THEN epoch(j.end_ts) - epoch(j.start_ts)
        ELSE greatest(
            coalesce(s.end_e, epoch(j.updated_ts)),
            epoch(j.updated_ts),
            epoch(j.start_ts)  -- (a job that started after the data's end ran no time yet)
        )
            - epoch(j.start_ts)
    END AS runtime_s,
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
    u.nvlink_gb,
    u.pcie_gb,
    u.gpus_never_active,
    u.samples,
    u.shared,
    o.hw_event_before_end,
    o.hw_event_kinds,
    u.model_params,
    u.tokens_per_s_per_gpu,
    u.mfu
FROM jobs_latest AS j
LEFT JOIN job_usage AS u
    ON u.cluster = j.cluster AND u.job_id = j.job_id
LEFT JOIN job_outcomes AS o
    ON o.cluster = j.cluster AND o.job_id = j.job_id
LEFT JOIN cluster_data_end AS s
    ON s.cluster = j.cluster
LEFT JOIN allocated AS a
    ON a.cluster = j.cluster
WHERE j.job_id = $job_id
    AND ($cluster IS NULL OR j.cluster = $cluster)
ORDER BY j.cluster
