-- data_end: where each cluster's data end, and where its telemetry ends, for the models.
--
-- Grain:   one row per cluster of data_extent (jobs, sample buckets or GPU events)
-- Reads:   data_extent, gpu_job_buckets
-- Params:  none
-- Returns: cluster, data_end (data_extent's: every rule's "now"), telemetry_end (the end of
--          the cluster's last sample interval; null for a cluster without telemetry)
--
-- A finding's span ends at data_end at the latest, never at the run's clock: a job still
-- running is seen running to the end of the data, as data_extent counts it (its scheduler's
-- records may run ahead of the telemetry while a telemetry source is down, and a cluster may
-- have no telemetry at all). An early prediction ("30 min in") needs that many minutes of the
-- job's samples: it is made only where telemetry_end reaches them.

SELECT
    e.cluster,
    e.data_end,
    t.telemetry_end
FROM data_extent AS e
LEFT JOIN (
    SELECT
        cluster,
        to_timestamp(max(interval_end_e)) AS telemetry_end
    FROM gpu_job_buckets
    GROUP BY cluster
) AS t
    ON t.cluster = e.cluster
