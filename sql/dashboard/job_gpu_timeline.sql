-- job_gpu_timeline: what each GPU of one job did, per time bucket.
--
-- Grain:   one row per (gpu, bucket)
-- Reads:   gpu_job_buckets
-- Params:
--   $cluster  the cluster
--   $job_id   the job
-- Returns: gpu, bucket, busy, gpu_util, sm_active, tensor_active, dram_active, fb_used_gib,
--          power_w
--
-- Means are time-weighted over the samples of the bucket whose field is known; a field no
-- sample reported is null (a gap in the line), never 0. gpu names the node and index
-- (and MIG instance) so a reader can find the card.

SELECT
    node || ':' || CAST(gpu_index AS VARCHAR)
        || coalesce('/mig' || CAST(mig_instance AS VARCHAR), '') AS gpu,
    bucket,
    effective_s / nullif(busy_known_s, 0) AS busy,
    util_sum / nullif(util_known_s, 0) / 100.0 AS gpu_util,
    sm_sum / nullif(sm_known_s, 0) AS sm_active,
    tensor_sum / nullif(tensor_known_s, 0) AS tensor_active,
    dram_sum / nullif(dram_known_s, 0) AS dram_active,
    fb_used_mib_max / 1024.0 AS fb_used_gib,
    power_sum / nullif(power_known_s, 0) AS power_w
FROM gpu_job_buckets
WHERE cluster = $cluster
    AND job_id = $job_id
ORDER BY gpu, bucket
