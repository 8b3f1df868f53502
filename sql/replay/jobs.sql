-- jobs: the GPU jobs of one cluster a replay of [$since, $until) runs, as the engine
-- reads them.
--
-- Grain:   one row per job_id of $cluster with GPUs that was submitted in [$since, $until), or
--          was running or pending at $since (a period starts with the queue and the machine
--          as they were)
-- Reads:   jobs_latest
-- Params:
--   $cluster  the cluster
--   $since    start of the period (TIMESTAMP, UTC)
--   $until    end of the period (exclusive, on submit time)
-- Returns: job_id, user, account, partition, qos, state, submit_e, start_e, end_e,
--          time_limit_s, gpus, n_nodes, gpu_type, cpus, mem_req_mib, nodes, pinned
--
-- Times are epoch seconds; start_e/end_e are null for a job that never started / has not ended.
-- A job without a submit time was submitted when it started. `pinned`: it was already running
-- at $since, so the replay runs it where and when it ran.

WITH jobs AS (
    SELECT
        *,
        coalesce(least(submit_ts, start_ts), submit_ts, start_ts) AS submitted,
        coalesce(gpus_requested, gpus, 1) AS asked
    FROM jobs_latest
    WHERE cluster = $cluster
)

SELECT
    job_id,
    coalesce(user, '') AS user,
    coalesce(account, '') AS account,
    coalesce(partition, '') AS partition,
    coalesce(qos, '') AS qos,
    coalesce(state, '') AS state,
    epoch(submitted) AS submit_e,
    epoch(start_ts) AS start_e,
    epoch(end_ts) AS end_e,
    time_limit_s,
    asked AS gpus,
    greatest(coalesce(len(nodes), 1), 1) AS n_nodes,
    gpu_type,
    cpus,
    mem_req_mib,
    coalesce(nodes, []) AS nodes,
    coalesce(start_ts < $since, false) AS pinned
FROM jobs
WHERE asked > 0
    AND submitted IS NOT NULL
    AND submitted < $until
    AND (
        submitted >= $since
        OR end_ts IS NULL
        OR end_ts > $since
    )
ORDER BY submit_e, job_id
