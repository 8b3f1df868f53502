-- job_span: the time one job's samples can lie in, to read only those days of the lake.
--
-- Grain:   one row per cluster that has a job (or an allocation) with this id
-- Reads:   jobs, job_gpus
-- Params:
--   $job_id   the job id
--   $cluster  the cluster, or NULL for any
-- Returns: cluster, first_ts (the earliest start of any of its records or allocations; null
--          when none has started), last_ts (the latest end), open (whether a started record
--          or allocation has no end yet: its samples run to the end of the data), nodes (the
--          nodes of its allocations, sorted: the only nodes its samples can be on)
--
-- A sample belongs to a job when one of its job_gpus intervals contains it (DESIGN §4), and
-- every version of the job's record is read, not only the latest: a requeued job's earlier
-- runs count. The caller widens the span by a margin for samples stamped by a label.

-- An end after tomorrow is none the data reached (sql/views/jobs_latest.sql): the span is open
-- (every day from the start is read); taken as an end, a "9999-12-31" overflowed the margin.
WITH spans AS (
    SELECT
        cluster,
        start_ts,
        CASE WHEN end_ts < date_trunc('day', now()) + INTERVAL 2 DAY THEN end_ts END AS end_ts,
        CAST(NULL AS VARCHAR) AS node
    FROM jobs
    WHERE job_id = $job_id
        AND ($cluster IS NULL OR cluster = $cluster)
    UNION ALL
    SELECT
        cluster,
        start_ts,
        CASE WHEN end_ts < date_trunc('day', now()) + INTERVAL 2 DAY THEN end_ts END AS end_ts,
        node
    FROM job_gpus
    WHERE job_id = $job_id
        AND ($cluster IS NULL OR cluster = $cluster)
)

SELECT
    cluster,
    min(start_ts) AS first_ts,
    max(end_ts) AS last_ts,
    bool_or(start_ts IS NOT NULL AND end_ts IS NULL) AS open,
    coalesce(list(DISTINCT node ORDER BY node) FILTER (WHERE node IS NOT NULL), []) AS nodes
FROM spans
GROUP BY cluster
ORDER BY cluster
