-- plain_scan_floor: the cheapest pass over the sample columns the marts read (bench baseline).
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   gpu_samples
-- Params:  none
-- Returns: cluster, job_id, samples, util_sum, sm_sum, power_sum, energy_max, fb_max

SELECT
    cluster,
    job_id,
    count(*) AS samples,
    sum(gpu_util_pct) AS util_sum,
    sum(sm_active) AS sm_sum,
    sum(power_w) AS power_sum,
    max(energy_j) AS energy_max,
    max(fb_used_mib) AS fb_max
FROM gpu_samples
GROUP BY cluster, job_id
