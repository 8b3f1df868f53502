-- data_end_samples: one row per cluster standing in for gpu_samples where a summary mart reads
-- samples only for the end of the data (max(epoch(ts) + interval_s)).
--
-- Grain:   one row per cluster
-- Reads:   summary_index
-- Params:  none
-- Returns: cluster, ts, interval_s
--
-- interval_end_e is max(epoch(ts) + interval_s) of the samples of its buckets, so with ts at the
-- epoch and interval_s = that end, epoch(ts) + interval_s gives the same value exactly.

SELECT
    cluster,
    to_timestamp(0) AS ts,
    max(interval_end_e) AS interval_s
FROM summary_index
GROUP BY cluster
