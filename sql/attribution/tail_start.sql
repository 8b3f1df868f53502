-- tail_start: where a built day partition stops depending only on its own day's samples.
--
-- Grain:   one row
-- Reads:   built_buckets (one day's partition of gpu_job_buckets as it was built)
-- Params:  none
-- Returns: from_ts (the earliest of the devices' last buckets; null when the partition is empty)
--
-- Only each device's last sample of a day stands for time measured to the next day's first
-- sample (its span, or the gap after it). Every bucket from this one on is rebuilt when the next
-- day's samples change; the buckets before it stay exactly as they are.

SELECT min(last_bucket) AS from_ts
FROM (
    SELECT max(bucket) AS last_bucket
    FROM built_buckets
    GROUP BY cluster, device, mig_instance
) AS last_buckets
