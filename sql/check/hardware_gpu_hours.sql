-- hardware_gpu_hours: no GPU's or node's finding puts more GPU-hours at stake than its GPUs
-- had inside the data.
--
-- Grain:   one row per GPU or node finding above its bound
-- Reads:   findings, gpus, data_extent
-- Params:  none
-- Returns: cluster, subject, detail
--
-- A GPU has one GPU × the data's span; a node the GPUs of its inventory (at least one) × the
-- data's span. A GPU's or node's finding about one job (job_id set: a straggler GPU costs its
-- whole job) is bounded by that job instead (job_gpu_hours).

WITH node_gpus AS (
    SELECT
        cluster,
        node,
        count(DISTINCT gpu_index) AS gpus
    FROM gpus
    GROUP BY cluster, node
),
bounded AS (
    SELECT
        f.cluster,
        f.finding_id,
        f.detector,
        f.subject_kind,
        f.subject_id,
        f.gpu_h_at_stake,
        CASE WHEN f.subject_kind = 'gpu' THEN 1 ELSE greatest(coalesce(n.gpus, 0), 1) END
            AS gpus,
        coalesce(epoch(x.data_end) - epoch(x.data_start), 0.0) / 3600.0 AS hours
    FROM findings AS f
    LEFT JOIN data_extent AS x
        ON x.cluster = f.cluster
    LEFT JOIN node_gpus AS n
        ON n.cluster = f.cluster AND n.node = f.subject_id
    WHERE f.subject_kind IN ('gpu', 'node') AND f.job_id IS NULL AND f.gpu_h_at_stake IS NOT NULL
)
SELECT
    cluster,
    'finding ' || finding_id || ' (' || detector || ')' AS subject,
    printf(
        'GPU-hours at stake %.2f exceed %s %s''s %d GPU(s) × the data''s %.2f h = %.2f GPU-h',
        gpu_h_at_stake,
        subject_kind,
        subject_id,
        gpus,
        hours,
        gpus * hours
    ) AS detail
FROM bounded
WHERE gpu_h_at_stake > gpus * hours * (1 + 1e-9) + 1e-6
ORDER BY cluster, finding_id
