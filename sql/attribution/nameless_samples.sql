-- nameless_samples: how many of a day's samples name neither their GPU's UUID nor its index.
--
-- Grain:   one row
-- Reads:   day_samples (the day's gpu_samples rows, as the per-day pass reads them)
-- Params:  none
-- Returns: samples
--
-- Such a sample has no GPU to count it on: the sample-level marts leave it out
-- (sql/views/sample_steps.sql), and the per-day pass says how many it left out
-- (warehouse/partitions.py). The per-day pass counts them only on a day that has any (its
-- devices, a few rows, say so first).

SELECT count(*) AS samples
FROM day_samples
WHERE gpu_uuid IS NULL AND gpu_index IS NULL
