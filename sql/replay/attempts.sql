-- attempts: what a job that ran more than once (a trace's retried attempts) held, attempt by
-- attempt, for the replay to run it for the time it held GPUs rather than from its first start
-- to its last end.
--
-- Grain:   one row per job_id of $cluster with requeues > 0 whose attempts `job_gpus` records
-- Reads:   jobs_latest, job_gpus
-- Params:
--   $cluster  the cluster
--   $end      the end of the data (TIMESTAMP, UTC): an attempt still running runs until then
-- Returns: job_id, attempts, held_s, attempt_nodes, attempt_gpus
--
-- An attempt is one distinct (start_ts, end_ts) span of the job's `job_gpus` rows. held_s: the
-- sum of its attempts' spans (the gaps between them were spent queued again); attempt_nodes and
-- attempt_gpus: the most nodes and GPUs one attempt held (a retry that moved to other machines
-- did not make the job wider).

WITH retried AS (
    SELECT job_id
    FROM jobs_latest
    WHERE cluster = $cluster
        AND coalesce(requeues, 0) > 0
),

held AS (
    SELECT
        g.job_id,
        g.start_ts,
        coalesce(g.end_ts, $end) AS end_ts,
        count(DISTINCT g.node) AS nodes,
        count(DISTINCT (g.node, g.gpu_index)) AS gpus
    FROM job_gpus AS g
    INNER JOIN retried AS r ON g.job_id = r.job_id
    WHERE g.cluster = $cluster
        AND g.start_ts IS NOT NULL
    GROUP BY g.job_id, g.start_ts, coalesce(g.end_ts, $end)
)

SELECT
    job_id,
    count(*)::INTEGER AS attempts,
    sum(greatest(epoch(end_ts) - epoch(start_ts), 0))::DOUBLE AS held_s,
    max(nodes)::INTEGER AS attempt_nodes,
    max(gpus)::INTEGER AS attempt_gpus
FROM held
GROUP BY job_id
ORDER BY job_id
