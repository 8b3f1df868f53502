-- partition_samples: the samples one day's partition of the sample-level marts is built from.
--
-- Grain:   one row per sample of day_samples, plus one per device from next_day_head
-- Reads:   day_samples (the day's gpu_samples rows, or those of the tail being rebuilt),
--          next_day_head
-- Params:  none
-- Returns: every gpu_samples column, as the sources wrote them (owners are decided over these
--          rows: the per-day pass reads them as unowned_samples)
--
-- The head rows only give the day's last samples their successor: whatever owner they get,
-- the rows they produce fall on the next day and are dropped by the builder
-- (warehouse/partitions.py).

SELECT * FROM day_samples
UNION ALL BY NAME
SELECT * FROM next_day_head
