-- samples_from: one day's samples from a bucket start on (the tail a next-day change rebuilds).
--
-- Grain:   one row per sample of day_files with ts >= $from_ts
-- Reads:   day_files (the day's gpu_samples files)
-- Params:
--   $from_ts  the first bucket to rebuild (TIMESTAMP WITH TIME ZONE)
-- Returns: every gpu_samples column

SELECT * FROM day_files WHERE ts >= $from_ts
