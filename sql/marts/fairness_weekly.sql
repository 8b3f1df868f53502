-- fairness_weekly: per ISO week, account and user — GPU-hours used against the share entitled,
-- queue waits, and the GPU-hours wasted (DESIGN §4.1, reference/fairness-policy-prediction §1.6).
--
-- Grain:   one row per (cluster, week, level, account, user); level 'account' rows have a null
--          user, level 'user' rows one user of the account
-- Reads:   job_gpu_intervals, jobs_latest, job_usage, job_outcomes, usage_daily, gpu_samples,
--          associations
-- Params:
--   $low_eff_below  a job whose mean busy fraction is below this is low-efficiency (e.g. 0.25)
-- Returns: cluster, week, level, account, user, jobs, jobs_started, alloc_gpu_h,
--          observed_gpu_h, effective_gpu_h, idle_gpu_h, energy_kwh, cpu_h, mem_gib_h,
--          usage_share, effective_share, level_share, entitled_share, usage_ratio,
--          wait_p50_s, wait_p95_s, low_eff_gpu_h, failed_gpu_h, unused_limit_gpu_h, waste_gpu_h
--
-- Weeks start Monday 00:00 UTC (ISO weeks). Allocated GPU-hours come from the scheduler's GPU
-- intervals (job_gpu_intervals), else from gpus × (start, end) like job_usage; a running job
-- counts to the end of the data (the last sample, else the job's last update). Allocations that
-- cross a week boundary are split at Monday 00:00. observed/effective/idle GPU-hours and energy
-- are the week's days of usage_daily. usage_share = the row's allocated GPU-hours ÷ the
-- cluster's in the week (Slurm's NormUsage, undecayed); entitled_share = the product of
-- normalized shares down the association tree (Slurm's classic S; trees up to 5 levels below
-- the row), level_share = the normalized share among its siblings (Fair Tree's S); both null
-- where the lake has no `associations` row for it (the latest snapshot of the cluster's tree
-- counts, so an association removed from the scheduler drops out). usage_ratio = usage_share ÷
-- entitled_share.
-- Waits: jobs that started in the week, start − submit. Waste categories may overlap:
-- low_eff = GPU-hours of jobs whose busy_mean < $low_eff_below, failed = of jobs that failed
-- (FAILED, NODE_FAIL, OUT_OF_MEMORY), unused_limit = gpus × (time limit − run time) of jobs that
-- ended in the week before their limit; waste = observed − effective (held, seen, not worked).
-- Every association gets a row in each week of data, also with no usage.

WITH data_end AS (
    SELECT
        cluster,
        max(epoch(ts) + interval_s) AS end_e
    FROM gpu_samples
    GROUP BY cluster
),
spans AS (
    SELECT
        cluster,
        job_id,
        gpus,
        start_e,
        end_e
    FROM job_gpu_intervals
    UNION ALL
    SELECT
        j.cluster,
        j.job_id,
        j.gpus,
        epoch(j.start_ts) AS start_e,
        greatest(
            epoch(j.start_ts), coalesce(epoch(j.end_ts), d.end_e, epoch(j.updated_ts))
        ) AS end_e
    FROM jobs_latest AS j
    LEFT JOIN data_end AS d
        ON d.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
        AND coalesce(j.gpus, 0) > 0
        AND NOT EXISTS (
            SELECT 1
            FROM job_gpu_intervals AS i
            WHERE i.cluster = j.cluster AND i.job_id = j.job_id
        )
),
job_span AS (
    SELECT
        j.cluster,
        j.job_id,
        epoch(j.start_ts) AS start_e,
        greatest(
            epoch(j.start_ts), coalesce(epoch(j.end_ts), d.end_e, epoch(j.updated_ts))
        ) AS end_e,
        coalesce(j.cpus, 0) AS cpus,
        coalesce(j.mem_req_mib, 0) / 1024.0 AS mem_gib
    FROM jobs_latest AS j
    LEFT JOIN data_end AS d
        ON d.cluster = j.cluster
    WHERE j.start_ts IS NOT NULL
),
-- Monday 1970-01-05 is 4 days after the epoch: week n starts at n × 604800 + 345600.
span_weeks AS (
    SELECT
        s.cluster,
        s.job_id,
        CAST(w AS BIGINT) AS week_n,
        (least(s.end_e, w * 604800.0 + 345600.0 + 604800.0)
            - greatest(s.start_e, w * 604800.0 + 345600.0)) * s.gpus AS alloc_s
    FROM spans AS s,
        unnest(generate_series(
            CAST(floor((s.start_e - 345600.0) / 604800.0) AS BIGINT),
            CAST(floor((s.end_e - 345600.0) / 604800.0) AS BIGINT)
        )) AS weeks(w)
),
host_weeks AS (
    SELECT
        s.cluster,
        s.job_id,
        CAST(w AS BIGINT) AS week_n,
        (least(s.end_e, w * 604800.0 + 345600.0 + 604800.0)
            - greatest(s.start_e, w * 604800.0 + 345600.0)) AS run_s,
        s.cpus,
        s.mem_gib
    FROM job_span AS s,
        unnest(generate_series(
            CAST(floor((s.start_e - 345600.0) / 604800.0) AS BIGINT),
            CAST(floor((s.end_e - 345600.0) / 604800.0) AS BIGINT)
        )) AS weeks(w)
),
alloc_week AS (
    SELECT
        cluster,
        job_id,
        week_n,
        sum(alloc_s) AS alloc_s
    FROM span_weeks
    WHERE alloc_s > 0
    GROUP BY cluster, job_id, week_n
),
host_week AS (
    SELECT
        cluster,
        job_id,
        week_n,
        sum(run_s * cpus) AS cpu_s,
        sum(run_s * mem_gib) AS mem_gib_s
    FROM host_weeks
    WHERE run_s > 0
    GROUP BY cluster, job_id, week_n
),
started_week AS (
    SELECT
        cluster,
        job_id,
        CAST(floor((epoch(start_ts) - 345600.0) / 604800.0) AS BIGINT) AS week_n,
        greatest(epoch(start_ts) - epoch(coalesce(submit_ts, start_ts)), 0) AS wait_s
    FROM jobs_latest
    WHERE start_ts IS NOT NULL
),
unused_week AS (
    SELECT
        j.cluster,
        j.job_id,
        CAST(floor((epoch(j.end_ts) - 345600.0) / 604800.0) AS BIGINT) AS week_n,
        coalesce(j.gpus, 0)
            * greatest(j.time_limit_s - (epoch(j.end_ts) - epoch(j.start_ts)), 0) AS unused_s
    FROM jobs_latest AS j
    LEFT JOIN job_outcomes AS o
        ON o.cluster = j.cluster AND o.job_id = j.job_id
    WHERE j.end_ts IS NOT NULL
        AND j.start_ts IS NOT NULL
        AND j.time_limit_s IS NOT NULL
        AND NOT coalesce(o.timed_out, FALSE)
),
job_week AS (
    SELECT
        k.cluster,
        k.job_id,
        k.week_n,
        coalesce(j.account, '(none)') AS account,
        coalesce(j.user, '(none)') AS user,
        coalesce(a.alloc_s, 0) AS alloc_s,
        coalesce(h.cpu_s, 0) AS cpu_s,
        coalesce(h.mem_gib_s, 0) AS mem_gib_s,
        s.wait_s,
        CASE WHEN u.busy_mean < $low_eff_below THEN coalesce(a.alloc_s, 0) ELSE 0 END
            AS low_eff_s,
        CASE WHEN coalesce(o.failed, FALSE) THEN coalesce(a.alloc_s, 0) ELSE 0 END AS failed_s,
        coalesce(n.unused_s, 0) AS unused_s
    FROM (
        SELECT cluster, job_id, week_n FROM alloc_week
        UNION
        SELECT cluster, job_id, week_n FROM started_week
        UNION
        SELECT cluster, job_id, week_n FROM unused_week
    ) AS k
    LEFT JOIN jobs_latest AS j
        ON j.cluster = k.cluster AND j.job_id = k.job_id
    LEFT JOIN alloc_week AS a
        ON a.cluster = k.cluster AND a.job_id = k.job_id AND a.week_n = k.week_n
    LEFT JOIN host_week AS h
        ON h.cluster = k.cluster AND h.job_id = k.job_id AND h.week_n = k.week_n
    LEFT JOIN started_week AS s
        ON s.cluster = k.cluster AND s.job_id = k.job_id AND s.week_n = k.week_n
    LEFT JOIN unused_week AS n
        ON n.cluster = k.cluster AND n.job_id = k.job_id AND n.week_n = k.week_n
    LEFT JOIN job_usage AS u
        ON u.cluster = k.cluster AND u.job_id = k.job_id
    LEFT JOIN job_outcomes AS o
        ON o.cluster = k.cluster AND o.job_id = k.job_id
),
job_rows AS (
    SELECT
        cluster,
        week_n,
        CASE WHEN GROUPING(user) = 1 THEN 'account' ELSE 'user' END AS level,
        account,
        user,
        count(DISTINCT job_id) FILTER (WHERE alloc_s > 0) AS jobs,
        count(wait_s) AS jobs_started,
        sum(alloc_s) / 3600.0 AS alloc_gpu_h,
        sum(cpu_s) / 3600.0 AS cpu_h,
        sum(mem_gib_s) / 3600.0 AS mem_gib_h,
        quantile_cont(wait_s, 0.5) AS wait_p50_s,
        quantile_cont(wait_s, 0.95) AS wait_p95_s,
        sum(low_eff_s) / 3600.0 AS low_eff_gpu_h,
        sum(failed_s) / 3600.0 AS failed_gpu_h,
        sum(unused_s) / 3600.0 AS unused_limit_gpu_h
    FROM job_week
    GROUP BY GROUPING SETS ((cluster, week_n, account), (cluster, week_n, account, user))
),
used_days AS (
    SELECT
        cluster,
        CAST(floor((epoch(CAST(date AS TIMESTAMP)) - 345600.0) / 604800.0) AS BIGINT) AS week_n,
        coalesce(account, '(none)') AS account,
        coalesce(user, '(none)') AS user,
        observed_gpu_h,
        effective_gpu_h,
        idle_gpu_h,
        energy_kwh
    FROM usage_daily
),
used_rows AS (
    SELECT
        cluster,
        week_n,
        CASE WHEN GROUPING(user) = 1 THEN 'account' ELSE 'user' END AS level,
        account,
        user,
        sum(observed_gpu_h) AS observed_gpu_h,
        sum(effective_gpu_h) AS effective_gpu_h,
        sum(idle_gpu_h) AS idle_gpu_h,
        sum(energy_kwh) AS energy_kwh
    FROM used_days
    GROUP BY GROUPING SETS ((cluster, week_n, account), (cluster, week_n, account, user))
),
assoc_latest AS (
    SELECT
        cluster,
        account,
        user,
        parent,
        raw_shares
    FROM associations
    QUALIFY updated_ts = max(updated_ts) OVER (PARTITION BY cluster)
),
-- A node of the association tree: an account (parent: its parent account) or a user under an
-- account (parent: that account). Users and sub-accounts of one account are siblings.
assoc_node AS (
    SELECT
        cluster,
        account,
        user,
        CASE WHEN user IS NULL THEN 'A:' || account ELSE 'U:' || account || '/' || user END
            AS node_key,
        CASE WHEN user IS NULL THEN 'A:' || parent ELSE 'A:' || account END AS parent_key,
        CAST(raw_shares AS DOUBLE) / nullif(
            sum(raw_shares) OVER (
                PARTITION BY cluster,
                CASE WHEN user IS NULL THEN 'A:' || parent ELSE 'A:' || account END
            ),
            0
        ) AS level_share
    FROM assoc_latest
),
assoc_share AS (
    SELECT
        n.cluster,
        n.account,
        n.user,
        n.level_share,
        coalesce(n.level_share, 1.0)
            * coalesce(p1.level_share, 1.0)
            * coalesce(p2.level_share, 1.0)
            * coalesce(p3.level_share, 1.0)
            * coalesce(p4.level_share, 1.0)
            * coalesce(p5.level_share, 1.0) AS entitled_share,
        n.level_share IS NULL AS unshared
    FROM assoc_node AS n
    LEFT JOIN assoc_node AS p1
        ON p1.cluster = n.cluster AND p1.node_key = n.parent_key
    LEFT JOIN assoc_node AS p2
        ON p2.cluster = n.cluster AND p2.node_key = p1.parent_key
    LEFT JOIN assoc_node AS p3
        ON p3.cluster = n.cluster AND p3.node_key = p2.parent_key
    LEFT JOIN assoc_node AS p4
        ON p4.cluster = n.cluster AND p4.node_key = p3.parent_key
    LEFT JOIN assoc_node AS p5
        ON p5.cluster = n.cluster AND p5.node_key = p4.parent_key
    WHERE n.account <> 'root' OR n.user IS NOT NULL
),
weeks AS (
    SELECT DISTINCT cluster, week_n FROM job_rows
    UNION
    SELECT DISTINCT cluster, week_n FROM used_rows
),
assoc_rows AS (
    SELECT
        w.cluster,
        w.week_n,
        CASE WHEN s.user IS NULL THEN 'account' ELSE 'user' END AS level,
        s.account,
        s.user,
        s.level_share,
        CASE WHEN s.unshared THEN NULL ELSE s.entitled_share END AS entitled_share
    FROM weeks AS w
    JOIN assoc_share AS s
        ON s.cluster = w.cluster
),
keys AS (
    SELECT cluster, week_n, level, account, user FROM job_rows
    UNION
    SELECT cluster, week_n, level, account, user FROM used_rows
    UNION
    SELECT cluster, week_n, level, account, user FROM assoc_rows
),
combined AS (
    SELECT
        k.cluster,
        k.week_n,
        k.level,
        k.account,
        k.user,
        coalesce(j.jobs, 0) AS jobs,
        coalesce(j.jobs_started, 0) AS jobs_started,
        coalesce(j.alloc_gpu_h, 0) AS alloc_gpu_h,
        coalesce(u.observed_gpu_h, 0) AS observed_gpu_h,
        coalesce(u.effective_gpu_h, 0) AS effective_gpu_h,
        coalesce(u.idle_gpu_h, 0) AS idle_gpu_h,
        coalesce(u.energy_kwh, 0) AS energy_kwh,
        coalesce(j.cpu_h, 0) AS cpu_h,
        coalesce(j.mem_gib_h, 0) AS mem_gib_h,
        s.level_share,
        s.entitled_share,
        j.wait_p50_s,
        j.wait_p95_s,
        coalesce(j.low_eff_gpu_h, 0) AS low_eff_gpu_h,
        coalesce(j.failed_gpu_h, 0) AS failed_gpu_h,
        coalesce(j.unused_limit_gpu_h, 0) AS unused_limit_gpu_h
    FROM keys AS k
    LEFT JOIN job_rows AS j
        ON j.cluster = k.cluster AND j.week_n = k.week_n AND j.level = k.level
        AND j.account = k.account AND j.user IS NOT DISTINCT FROM k.user
    LEFT JOIN used_rows AS u
        ON u.cluster = k.cluster AND u.week_n = k.week_n AND u.level = k.level
        AND u.account = k.account AND u.user IS NOT DISTINCT FROM k.user
    LEFT JOIN assoc_rows AS s
        ON s.cluster = k.cluster AND s.week_n = k.week_n AND s.level = k.level
        AND s.account = k.account AND s.user IS NOT DISTINCT FROM k.user
),
totals AS (
    SELECT
        cluster,
        week_n,
        sum(alloc_gpu_h) AS alloc_gpu_h,
        sum(effective_gpu_h) AS effective_gpu_h
    FROM combined
    WHERE level = 'account'
    GROUP BY cluster, week_n
)
SELECT
    c.cluster,
    CAST(to_timestamp(c.week_n * 604800 + 345600) AS DATE) AS week,
    c.level,
    c.account,
    c.user,
    c.jobs,
    c.jobs_started,
    c.alloc_gpu_h,
    c.observed_gpu_h,
    c.effective_gpu_h,
    c.idle_gpu_h,
    c.energy_kwh,
    c.cpu_h,
    c.mem_gib_h,
    c.alloc_gpu_h / nullif(t.alloc_gpu_h, 0) AS usage_share,
    c.effective_gpu_h / nullif(t.effective_gpu_h, 0) AS effective_share,
    c.level_share,
    c.entitled_share,
    (c.alloc_gpu_h / nullif(t.alloc_gpu_h, 0)) / nullif(c.entitled_share, 0) AS usage_ratio,
    c.wait_p50_s,
    c.wait_p95_s,
    c.low_eff_gpu_h,
    c.failed_gpu_h,
    c.unused_limit_gpu_h,
    greatest(c.observed_gpu_h - c.effective_gpu_h, 0) AS waste_gpu_h
FROM combined AS c
JOIN totals AS t
    ON t.cluster = c.cluster AND t.week_n = c.week_n
ORDER BY c.cluster, week, c.level, c.account, c.user
