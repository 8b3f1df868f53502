-- buckets_before: the rows of a built day partition of gpu_job_buckets that a tail rebuild keeps.
--
-- Grain:   one row per built_buckets row with bucket < $from_ts
-- Reads:   built_buckets
-- Params:
--   $from_ts  the first bucket being rebuilt (TIMESTAMP WITH TIME ZONE)
-- Returns: every gpu_job_buckets column

SELECT * FROM built_buckets WHERE bucket < $from_ts
