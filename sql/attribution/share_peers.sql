-- share_peers: the intervals job_gpu_shares needs to cut some jobs' shares of their GPUs: the
-- jobs' own, and every other job's on the same device that meets one of them in time.
--
-- Grain:   one row per job_gpu_intervals row
-- Reads:   share_pool (job_gpu_intervals of every job), share_jobs (cluster, job_id)
-- Params:  none
-- Returns: every column of job_gpu_intervals
--
-- A piece of a job's interval is cut only where another interval on its device starts or ends
-- inside it, so the intervals that do not meet the job's give it the same pieces and sharers
-- whether they are read or not: the update reads these, not the device's whole history.
-- (A join on the device, not a correlated EXISTS: that one DuckDB runs as a nested loop.)

SELECT DISTINCT p.*
FROM share_pool AS p
JOIN (
    SELECT
        m.cluster,
        m.device,
        m.start_e,
        m.end_e
    FROM share_pool AS m
    JOIN share_jobs AS s
        ON s.cluster = m.cluster AND s.job_id = m.job_id
) AS m
    ON m.cluster = p.cluster
    AND m.device = p.device
    AND p.start_e <= m.end_e
    AND p.end_e >= m.start_e
