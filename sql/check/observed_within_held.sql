-- observed_within_held: no job the scheduler recorded is observed longer than it held its GPUs.
--
-- Grain:   one row per job_usage row of a recorded job whose observed GPU-hours exceed its
--          allocated ones
-- Reads:   job_usage, jobs_latest
-- Params:  none
-- Returns: cluster, subject, detail
--
-- DESIGN §4: a sample's span stops at its allocation's end and a GPU several jobs hold is split
-- among them, so a job's observed GPU-hours are a part of its allocated ones. More means the
-- samples' owners and the allocations disagree (an allocation row ending long after its job, a
-- GPU named by two sources as two, samples labelled for a job the records place elsewhere):
-- the job's idle, effective and energy figures are then another job's too. Tolerance: 0.1 %
-- and 0.01 GPU-hours (the last sample's span and the bucket edges).

SELECT
    u.cluster,
    'job ' || u.job_id AS subject,
    printf(
        'observed %.2f GPU-hours, more than the %.2f it held (allocations and samples disagree)',
        u.observed_gpu_h,
        coalesce(u.alloc_gpu_h, 0.0)
    ) AS detail
FROM job_usage AS u
SEMI JOIN jobs_latest AS j
    ON j.cluster = u.cluster AND j.job_id = u.job_id
WHERE u.observed_gpu_h > coalesce(u.alloc_gpu_h, 0.0) * 1.001 + 0.01
ORDER BY u.cluster, u.job_id
