-- job_table: the jobs of one cluster and window, filtered the way the Jobs page asks.
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   job_usage, jobs_latest, cluster_data_end
-- Params:
--   $cluster    the cluster
--   $start      only jobs running after this, or starting at or after it (one that ran before and ended at it ran none of the window) (TIMESTAMP WITH TIME ZONE, UTC)
--   $end        only jobs started before this
--   $viewer     only this user's jobs (a signed-in non-manager), or NULL for everyone's
--               (a user name matches in any case)
--   $needle     lower-case text that job id, name, user or account must contain ('' = any)
--   $users      users to keep (VARCHAR[]; empty = any)
--   $accounts   accounts to keep (VARCHAR[]; empty = any)
--   $partitions partitions to keep (VARCHAR[]; empty = any)
--   $states     states to keep (VARCHAR[]; empty = any); 'CANCELLED by 123' counts as CANCELLED
--   $min_idle_gpu_h  only jobs that left at least this many GPU-hours idle (0 = any)
--   $limit      at most this many rows, the most wasteful first
-- Returns: job_id, job_name, user, account, partition, state, gpus, start_ts, end_ts,
--          runtime_h, alloc_gpu_h, idle_gpu_h, idle_share, busy_mean, sm_active_mean,
--          tensor_active_mean, gpus_never_active, energy_kwh, kg_co2e
--
-- idle_gpu_h is unknown (null) for a job no telemetry saw, not 0. Every filter is a bound
-- value: free text reaches SQL only as $needle, compared with contains(), so quotes and SQL
-- keywords in it are just characters to look for.

SELECT
    u.job_id,
    j.job_name,
    u.user,
    u.account,
    u.partition,
    split_part(u.state, ' ', 1) AS state,
    u.gpus,
    u.start_ts,
    u.end_ts,
    -- a job still running: to the later of its cluster's data end and its record's last
    -- collection, as `gpuledger job` counts it (its record's time alone fell short of the
    -- telemetry: GPU-hours above its GPUs × its run time)
    (
        CASE
            WHEN u.end_ts IS NOT NULL THEN epoch(u.end_ts)
            ELSE greatest(
                coalesce(d.end_e, epoch(j.updated_ts)),
                epoch(j.updated_ts),
                epoch(u.start_ts)  -- (a job that started after the data's end ran no time yet)
            )
        END - epoch(u.start_ts)
    ) / 3600.0 AS runtime_h,
    u.alloc_gpu_h,
    CASE WHEN u.observed_gpu_h > 0 THEN u.idle_gpu_h END AS idle_gpu_h,
    u.idle_gpu_h / nullif(u.observed_gpu_h, 0) AS idle_share,
    u.busy_mean,
    u.sm_active_mean,
    u.tensor_active_mean,
    u.gpus_never_active,
    u.energy_kwh,
    u.kg_co2e
FROM job_usage AS u
LEFT JOIN jobs_latest AS j
    ON j.cluster = u.cluster
    AND j.job_id = u.job_id
LEFT JOIN cluster_data_end AS d
    ON d.cluster = u.cluster
WHERE u.cluster = $cluster
    AND (u.end_ts IS NULL OR u.end_ts > $start OR u.start_ts >= $start)
    AND u.start_ts < $end
    AND ($viewer IS NULL OR lower(u.user) = lower($viewer))
    AND (
        $needle = ''
        OR contains(lower(u.job_id), $needle)
        OR contains(lower(coalesce(j.job_name, '')), $needle)
        OR contains(lower(coalesce(u.user, '')), $needle)
        OR contains(lower(coalesce(u.account, '')), $needle)
    )
    AND (len($users) = 0 OR list_contains($users, u.user))
    AND (len($accounts) = 0 OR list_contains($accounts, u.account))
    AND (len($partitions) = 0 OR list_contains($partitions, u.partition))
    AND (len($states) = 0 OR list_contains($states, split_part(u.state, ' ', 1)))
    AND coalesce(u.idle_gpu_h, 0) >= $min_idle_gpu_h
ORDER BY idle_gpu_h DESC NULLS LAST, u.job_id
LIMIT $limit
