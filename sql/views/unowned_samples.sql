-- unowned_samples: the GPU samples as their sources wrote them, before owners are decided.
--
-- Grain:   one row per gpu_samples row
-- Reads:   gpu_samples
-- Params:  none
-- Returns: every gpu_samples column; job_id is the source's own label (an exporter's hpc_job or
--          pod label, the simulator's), or null
--
-- What sql/attribution/sample_owners.sql and sql/views/owned_samples.sql read over the whole
-- lake; the per-day pass (warehouse/partitions.py) reads one day's files under this name.

SELECT * FROM gpu_samples
