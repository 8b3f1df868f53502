-- running_jobs: the jobs running at the end of each cluster's data, the largest first, with
-- what they hold now and so far (`gpuledger serve`'s per-job series).
--
-- Grain:   one row per running (cluster, job_id), at most $max_jobs per cluster (running_by_account
--          counts them all)
-- Reads:   jobs_latest, data_extent, cluster_data_end, job_usage, gpu_job_buckets, job_gpus,
--          findings
-- Params:
--   $bucket_s  the bucket width the marts were built with, in seconds
--   $max_jobs  at most this many jobs per cluster (the largest by GPUs, then the longest running)
-- Returns: cluster, job_id, user, account, partition, gpus, start_ts, running_s,
--          allocated_gpu_h, idle_gpu_h, effective_gpu_h, gpus_busy, gpus_idle, gpu_h_at_stake,
--          gpu_slots (list of struct(node, gpu_index): the GPUs it holds now)
--
-- Running: started at or before the end of the cluster's data and no end time in the job's
-- latest version; running_s runs to the later of the end of its cluster's telemetry
-- (cluster_data_end) and its own record's last collection, as `gpuledger job` counts it (not
-- the latest record of any job). "Now" is the cluster's last complete bucket (as occupancy_now): a GPU of the
-- job is busy there when it was active for more of its observed time than idle, idle when
-- otherwise observed; GPUs not observed are neither, and both counts stay within the job's
-- GPUs. gpu_h_at_stake sums the job's open findings' figure (findings_open's rule).

WITH running AS (
    SELECT
        j.cluster,
        j.job_id,
        j.user,
        j.account,
        j.partition,
        coalesce(j.gpus, 0) AS gpus,
        j.start_ts,
        greatest(
            coalesce(d.end_e, epoch(j.updated_ts)),
            epoch(j.updated_ts),
            epoch(j.start_ts)  -- (a job that started after the data's end ran no time yet)
        )
            - epoch(j.start_ts) AS running_s
    FROM jobs_latest AS j
    JOIN data_extent AS e
        ON e.cluster = j.cluster
    LEFT JOIN cluster_data_end AS d
        ON d.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
        AND j.start_ts <= e.data_end
        AND j.end_ts IS NULL
    QUALIFY row_number() OVER (
        PARTITION BY j.cluster ORDER BY coalesce(j.gpus, 0) DESC, j.start_ts, j.job_id
    ) <= $max_jobs
),
now_bucket AS (
    SELECT
        b.cluster,
        max(b.bucket) FILTER (WHERE epoch(b.bucket) + $bucket_s <= e.end_e) AS whole,
        max(b.bucket) AS last
    FROM gpu_job_buckets AS b
    JOIN cluster_data_end AS e
        ON e.cluster = b.cluster
    GROUP BY b.cluster
),
devices_now AS (
    SELECT
        b.cluster,
        b.job_id,
        b.device,
        sum(b.active_s) AS active_s,
        sum(b.idle_s) AS idle_s
    FROM gpu_job_buckets AS b
    JOIN now_bucket AS n
        ON n.cluster = b.cluster AND b.bucket = coalesce(n.whole, n.last)
    JOIN running AS r
        ON r.cluster = b.cluster AND r.job_id = b.job_id
    GROUP BY b.cluster, b.job_id, b.device
),
states_now AS (
    SELECT
        cluster,
        job_id,
        count(*) FILTER (WHERE active_s > idle_s) AS busy,
        count(*) FILTER (WHERE active_s <= idle_s AND active_s + idle_s > 0) AS idle
    FROM devices_now
    GROUP BY cluster, job_id
),
stakes AS (
    SELECT
        cluster,
        job_id,
        sum(gpu_h_at_stake) AS gpu_h_at_stake
    FROM (
        SELECT
            cluster,
            job_id,
            end_ts,
            gpu_h_at_stake
        FROM findings
        WHERE job_id IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY cluster, finding_id ORDER BY detected_ts DESC) = 1
    ) AS latest
    WHERE end_ts IS NULL
    GROUP BY cluster, job_id
),
slots AS (
    SELECT
        g.cluster,
        g.job_id,
        list(DISTINCT struct_pack(node := g.node, gpu_index := g.gpu_index)) AS gpu_slots
    FROM job_gpus AS g
    JOIN running AS r
        ON r.cluster = g.cluster AND r.job_id = g.job_id
    WHERE g.end_ts IS NULL AND g.node IS NOT NULL AND g.gpu_index IS NOT NULL
    GROUP BY g.cluster, g.job_id
)
SELECT
    r.cluster,
    r.job_id,
    r.user,
    r.account,
    r.partition,
    r.gpus,
    r.start_ts,
    r.running_s,
    coalesce(u.alloc_gpu_h, 0) AS allocated_gpu_h,
    coalesce(u.idle_gpu_h, 0) AS idle_gpu_h,
    coalesce(u.effective_gpu_h, 0) AS effective_gpu_h,
    least(coalesce(s.busy, 0), r.gpus) AS gpus_busy,
    least(coalesce(s.idle, 0), r.gpus - least(coalesce(s.busy, 0), r.gpus)) AS gpus_idle,
    coalesce(k.gpu_h_at_stake, 0) AS gpu_h_at_stake,
    coalesce(l.gpu_slots, []) AS gpu_slots
FROM running AS r
LEFT JOIN job_usage AS u
    ON u.cluster = r.cluster AND u.job_id = r.job_id
LEFT JOIN states_now AS s
    ON s.cluster = r.cluster AND s.job_id = r.job_id
LEFT JOIN stakes AS k
    ON k.cluster = r.cluster AND k.job_id = r.job_id
LEFT JOIN slots AS l
    ON l.cluster = r.cluster AND l.job_id = r.job_id
ORDER BY r.cluster, r.gpus DESC, r.start_ts, r.job_id
