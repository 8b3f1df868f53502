-- decayed_usage: GPU-hours per account and user as the scheduler's fair-share sees them at a
-- moment — every allocated GPU-second weighted by 2^(-age / half-life) (Slurm's
-- PriorityDecayHalfLife, Kueue's usageHalfLifeTime).
--
-- Grain:   one row per (level, account, user); level 'account' rows have a null user
-- Reads:   job_gpu_shares, jobs_latest
-- Params:
--   $cluster      cluster name
--   $as_of_e      the moment (epoch seconds); allocations after it are not counted
--   $half_life_s  decay half-life in seconds
-- Returns: level, account, user, alloc_gpu_h, decayed_gpu_h
--
-- Exact for any span: ∫ from s to e of 2^(-(T - t)/h) dt = h / ln 2 × (2^(-(T - e)/h) - 2^(-(T - s)/h)).
-- Spans are those of fairness_weekly (scheduler GPU intervals, a GPU held by several jobs at
-- once split evenly among them; a job without them holds its gpus over its run).

WITH spans AS (
    SELECT
        cluster,
        job_id,
        gpus * share AS gpus,
        start_e,
        end_e
    FROM job_gpu_shares
    WHERE cluster = $cluster
),
clipped AS (
    SELECT
        s.job_id,
        s.gpus,
        s.start_e,
        least(s.end_e, $as_of_e) AS end_e
    FROM spans AS s
    WHERE s.start_e < $as_of_e
),
per_job AS (
    SELECT
        c.job_id,
        sum(c.gpus * (c.end_e - c.start_e)) / 3600.0 AS alloc_gpu_h,
        sum(
            c.gpus * $half_life_s / ln(2) * (
                pow(2.0, -($as_of_e - c.end_e) / $half_life_s)
                - pow(2.0, -($as_of_e - c.start_e) / $half_life_s)
            )
        ) / 3600.0 AS decayed_gpu_h
    FROM clipped AS c
    GROUP BY c.job_id
)
SELECT
    CASE WHEN GROUPING(user) = 1 THEN 'account' ELSE 'user' END AS level,
    account,
    user,
    sum(alloc_gpu_h) AS alloc_gpu_h,
    sum(decayed_gpu_h) AS decayed_gpu_h
FROM (
    SELECT
        coalesce(j.account, '(none)') AS account,
        coalesce(j.user, '(none)') AS user,
        p.alloc_gpu_h,
        p.decayed_gpu_h
    FROM per_job AS p
    LEFT JOIN jobs_latest AS j
        ON j.cluster = $cluster AND j.job_id = p.job_id
) AS by_job
GROUP BY GROUPING SETS ((account), (account, user))
ORDER BY level, account, user
