-- telemetry_end: where each cluster's telemetry ends, for the models' predictions.
--
-- Grain:   one row per cluster with sample-level marts
-- Reads:   gpu_job_buckets
-- Params:  none
-- Returns: cluster, telemetry_end (the end of the cluster's last sample interval)
--
-- An early prediction ("30 min in") needs that many minutes of the job's samples: the data's end
-- by data_extent may run ahead of the telemetry (scheduler records while a telemetry source is
-- down), and the run's clock further still.

SELECT
    cluster,
    to_timestamp(max(interval_end_e)) AS telemetry_end
FROM gpu_job_buckets
GROUP BY cluster
