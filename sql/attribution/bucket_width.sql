-- bucket_width: the bucket width the lake's marts were built with, in seconds.
--
-- Grain:   one row
-- Reads:   cluster_occupancy
-- Params:  none
-- Returns: width_s (null where no cluster has two buckets)
--
-- cluster_occupancy has a row for every bucket of a cluster's data span, so the spacing of its
-- buckets is their width, whatever the configuration of the process reading them says (a lake
-- attributed with `--bucket 600` read at the default 300 s started its windows mid-bucket).

SELECT min(gap_s) AS width_s
FROM (
    SELECT epoch(bucket) - epoch(lag(bucket) OVER (PARTITION BY cluster ORDER BY bucket)) AS gap_s
    FROM cluster_occupancy
)
WHERE gap_s > 0
