-- owner_gpu_hours: no user's or account's finding puts more GPU-hours at stake than it was
-- allocated.
--
-- Grain:   one row per user or account finding above its owner's allocated GPU-hours
-- Reads:   findings, job_usage
-- Params:  none
-- Returns: cluster, subject, detail
--
-- The bound is the owner's allocated GPU-hours over all the data (job_usage.alloc_gpu_h, in
-- which a running job counts up to the end of the data); a finding about its last 7 days can
-- only be smaller.

WITH allocated AS (
    SELECT cluster, 'user' AS kind, user AS owner, sum(alloc_gpu_h) AS gpu_h
    FROM job_usage
    WHERE user IS NOT NULL
    GROUP BY cluster, user
    UNION ALL
    SELECT cluster, 'account' AS kind, account AS owner, sum(alloc_gpu_h) AS gpu_h
    FROM job_usage
    WHERE account IS NOT NULL
    GROUP BY cluster, account
)
SELECT
    f.cluster,
    'finding ' || f.finding_id || ' (' || f.detector || ')' AS subject,
    printf(
        'GPU-hours at stake %.2f exceed the %.2f GPU-h %s %s was allocated',
        f.gpu_h_at_stake,
        coalesce(a.gpu_h, 0.0),
        f.subject_kind,
        f.subject_id
    ) AS detail
FROM findings AS f
LEFT JOIN allocated AS a
    ON a.cluster = f.cluster AND a.kind = f.subject_kind AND a.owner = f.subject_id
WHERE f.subject_kind IN ('user', 'account')
    AND f.gpu_h_at_stake > coalesce(a.gpu_h, 0.0) * (1 + 1e-9) + 1e-6
ORDER BY f.cluster, f.finding_id
