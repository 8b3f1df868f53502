-- throughput_bounded: no job's reported training throughput claims more than its GPUs can do.
--
-- Grain:   one row per violation: a job whose reported parameter count × tokens/s imply more
--          model FLOP/s than its GPUs' peak (job_usage gives it no MFU)
-- Reads:   job_usage, job_gpu_daily, gpu_models
-- Params:  none
-- Returns: cluster, subject, detail
--
-- A training step costs about 6 FLOPs per parameter and token, so 6 × model_params ×
-- tokens_per_s_per_gpu cannot exceed one GPU's peak dense BF16 FLOP/s (gpu_models, where every
-- GPU-day of the job was on one known model, as job_usage's mfu). Above it, the application
-- reported a wrong parameter count or token count: job_usage shows its tokens/s and no MFU.

WITH peak AS (
    SELECT
        d.cluster,
        d.job_id,
        max(m.peak_bf16_dense_tflops) AS peak_tflops
    FROM job_gpu_daily AS d
    LEFT JOIN gpu_models AS m
        ON m.model = d.model
    GROUP BY d.cluster, d.job_id
    HAVING count(DISTINCT d.model) = 1
        AND count(m.peak_bf16_dense_tflops) = count(*)
        AND count(d.mig_instance) = 0
)
SELECT
    u.cluster,
    'job ' || u.job_id AS subject,
    'reported ' || CAST(u.model_params AS VARCHAR) || ' parameters at '
    || CAST(round(u.tokens_per_s_per_gpu, 1) AS VARCHAR) || ' tokens/s per GPU: '
    || CAST(round(6 * u.model_params * u.tokens_per_s_per_gpu / 1e12, 1) AS VARCHAR)
    || ' TFLOP/s per GPU, above the GPU''s peak of '
    || CAST(p.peak_tflops AS VARCHAR) || ' (a wrong parameter or token count; no MFU)'
        AS detail
FROM job_usage AS u
JOIN peak AS p
    ON p.cluster = u.cluster AND p.job_id = u.job_id
WHERE 6 * u.model_params * u.tokens_per_s_per_gpu > p.peak_tflops * 1e12
ORDER BY u.cluster, u.job_id
