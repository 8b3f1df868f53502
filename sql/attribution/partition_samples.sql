-- partition_samples: the samples one day's partition of the sample-level marts is built from.
--
-- Grain:   one row per sample of day_samples, plus one per device from next_day_head
-- Reads:   day_samples (the day's gpu_samples files), next_day_head
-- Params:  none
-- Returns: every gpu_samples column
--
-- The head rows only give the day's last samples their successor; the rows they produce fall
-- on the next day and are dropped by the builder (warehouse/partitions.py).

SELECT * FROM day_samples
UNION ALL BY NAME
SELECT * FROM next_day_head
