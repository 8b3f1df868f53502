-- partition_samples: the samples one day's partition of the sample-level marts is built from,
-- each with its owner.
--
-- Grain:   one row per sample of day_owned, plus one per device from next_day_head
-- Reads:   day_owned (the day's samples with their owners: sql/views/owned_samples.sql over
--          them), next_day_head
-- Params:  none
-- Returns: every gpu_samples column
--
-- The head rows only give the day's last samples their successor; they carry no owner, and
-- the rows they produce fall on the next day and are dropped by the builder
-- (warehouse/partitions.py).

SELECT * FROM day_owned
UNION ALL BY NAME
SELECT * FROM next_day_head
