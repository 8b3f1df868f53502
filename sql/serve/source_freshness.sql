-- source_freshness: per cluster and source, the newest GPU sample and job record landed, and how
-- far each is behind the end of the cluster's data (`gpuledger serve`).
--
-- Grain:   one row per (cluster, kind, source): kind 'gpu_samples' or 'jobs'
-- Reads:   gpu_samples, jobs, data_extent
-- Params:  none
-- Returns: cluster, kind, source, newest_ts, data_end, behind_s
--
-- The source is the rows' own `source` column ('dcgm-exporter', 'prometheus', 'slurm', …;
-- 'unknown' where null). A job record's time is when it was collected (updated_ts). behind_s
-- is data_end - newest_ts: a source that stopped shows a growing gap, while the others go on.

WITH newest AS (
    SELECT
        cluster,
        'gpu_samples' AS kind,
        coalesce(source, 'unknown') AS source,
        max(ts) AS newest_ts
    FROM gpu_samples
    GROUP BY cluster, coalesce(source, 'unknown')
    UNION ALL
    SELECT
        cluster,
        'jobs' AS kind,
        coalesce(source, 'unknown') AS source,
        max(updated_ts) AS newest_ts
    FROM jobs
    GROUP BY cluster, coalesce(source, 'unknown')
)
SELECT
    n.cluster,
    n.kind,
    n.source,
    n.newest_ts,
    e.data_end,
    greatest(epoch(e.data_end) - epoch(n.newest_ts), 0) AS behind_s
FROM newest AS n
LEFT JOIN data_extent AS e
    ON e.cluster = n.cluster
ORDER BY n.cluster, n.kind, n.source
