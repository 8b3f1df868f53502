-- jobs_latest: the newest version of every job (a collector lands a new row each time a job changes).
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   jobs
-- Params:  none
-- Returns: every column of jobs
--
-- gpus below 0 (another tool's file) is unknown: null. Ties on updated_ts (two collectors saw
-- the same instant) go to the later state in the job's life: an end time beats none.

SELECT
    cluster,
    job_id,
    job_id_raw,
    user,
    account,
    partition,
    qos,
    job_name,
    state,
    exit_code,
    submit_ts,
    start_ts,
    end_ts,
    time_limit_s,
    CASE WHEN gpus >= 0 THEN gpus END AS gpus,
    gpus_requested,
    gpu_type,
    nodes,
    cpus,
    mem_req_mib,
    cpu_time_s,
    max_rss_mib,
    interactive,
    requeues,
    source,
    updated_ts
FROM jobs
-- a record without its job's id (another tool's file) names no job
WHERE job_id IS NOT NULL
QUALIFY row_number() OVER (
    PARTITION BY cluster, job_id
    ORDER BY updated_ts DESC, end_ts DESC NULLS LAST, start_ts DESC NULLS LAST, state
) = 1
