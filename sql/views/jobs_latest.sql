-- jobs_latest: the newest version of every job (a collector lands a new row each time a job changes).
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   jobs
-- Params:  none
-- Returns: every column of jobs
--
-- A count, size or time below 0 (another tool's file: gpus, a time limit, CPUs, memory, CPU
-- time) is unknown: null. An end before the start (a broken record) is the start: the run is
-- none, not negative. An end after tomorrow (UTC, this machine's clock) is no end the data can
-- have reached (a "9999-12-31" for unknown, a wrong clock), as data_extent leaves such times
-- out: the job had ended by the time its record was collected (updated_ts), where that is a
-- time the data reached, else it ended at its start (its run is unknown: no GPU-hours are
-- claimed for it). Taken as an end, one such record made `attribute` build a day partition
-- for every day to the year 9999 (hours, gigabytes), and 2 GPUs for 10 minutes counted
-- 227,893 GPU-hours. Ties on updated_ts (two collectors saw the same instant) go to the later
-- state in the job's life: an end time beats none.

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
    CASE
        WHEN end_ts < start_ts THEN start_ts
        WHEN end_ts < date_trunc('day', now()) + INTERVAL 2 DAY THEN end_ts
        -- (after tomorrow: the job had ended by the record's collection, where that is a time
        -- the data reached; else its run is unknown and holds nothing)
        WHEN end_ts IS NOT NULL AND updated_ts < date_trunc('day', now()) + INTERVAL 2 DAY
            THEN greatest(updated_ts, start_ts)
        WHEN end_ts IS NOT NULL THEN start_ts
    END AS end_ts,
    CASE WHEN time_limit_s >= 0 THEN time_limit_s END AS time_limit_s,
    CASE WHEN gpus >= 0 THEN gpus END AS gpus,
    CASE WHEN gpus_requested >= 0 THEN gpus_requested END AS gpus_requested,
    gpu_type,
    nodes,
    CASE WHEN cpus >= 0 THEN cpus END AS cpus,
    CASE WHEN mem_req_mib >= 0 THEN mem_req_mib END AS mem_req_mib,
    CASE WHEN cpu_time_s >= 0 THEN cpu_time_s END AS cpu_time_s,
    CASE WHEN max_rss_mib >= 0 THEN max_rss_mib END AS max_rss_mib,
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
