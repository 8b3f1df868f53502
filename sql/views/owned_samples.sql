-- owned_samples: every GPU sample with its owner by the allocation rule of DESIGN §4.
--
-- Grain:   one row per row of unowned_samples
-- Reads:   unowned_samples (gpu_samples rows as their source wrote them), sample_owners
-- Params:  none
-- Returns: every gpu_samples column, job_id the owner (sql/attribution/sample_owners.sql)
--
-- The raw files keep the job_id their source wrote (an exporter's label, or none); readers
-- that need each sample's job read this (the per-day pass, the bottleneck signals), never the
-- raw job_id.

SELECT s.* REPLACE (o.job_id AS job_id)
FROM unowned_samples AS s
LEFT JOIN sample_owners AS o
    ON o.cluster = s.cluster
    AND o.node = s.node
    AND o.ts = s.ts
    AND o.gpu_index IS NOT DISTINCT FROM s.gpu_index
    AND o.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid
    AND o.mig_instance IS NOT DISTINCT FROM s.mig_instance
    AND o.label IS NOT DISTINCT FROM s.job_id
