-- fairness_weekly: per ISO week, account and user — GPU-hours used against the share entitled,
-- queue waits, and the GPU-hours wasted (DESIGN §4.1, reference/fairness-policy-prediction §1.6).
--
-- Grain:   one row per (cluster, week, level, account, user); level 'account' rows have a null
--          user, level 'user' rows one user of the account
-- Reads:   job_gpu_shares, jobs_latest, job_usage, job_outcomes, usage_daily,
--          cluster_data_end (for the end of the data only), gpus (the inventory's count),
--          associations
-- Params:
--   $low_eff_below  a job whose mean busy fraction is below this is low-efficiency (e.g. 0.25)
-- Returns: cluster, week, level, account, user, jobs, jobs_started, alloc_gpu_h,
--          observed_gpu_h, effective_gpu_h, idle_gpu_h, energy_kwh, cpu_h, mem_gib_h,
--          usage_share, effective_share, level_share, entitled_share, usage_ratio,
--          wait_p50_s, wait_p95_s, low_eff_gpu_h, failed_gpu_h, unused_limit_gpu_h, waste_gpu_h,
--          kg_co2e
--
-- Weeks start Monday 00:00 UTC (ISO weeks). Allocated GPU-hours come from the scheduler's GPU
-- intervals (job_gpu_shares: a GPU held by several jobs at once split evenly among them; a job
-- without job_gpus rows holds its gpus over its run there, as in job_usage); a running job
-- counts to the end of the data (cluster_data_end: the last sample, else the latest scheduler
-- record's time; else the job's last update). Allocations that
-- cross a week boundary are split at Monday 00:00. observed/effective/idle GPU-hours and energy
-- (energy_kwh and kg_co2e: null when no day of it is known) are the week's days of usage_daily. usage_share = the row's allocated GPU-hours ÷ the
-- cluster's in the week (Slurm's NormUsage, undecayed); entitled_share = the product of
-- normalized shares down the association tree (Slurm's classic S; trees up to 5 levels below
-- the row), level_share = the normalized share among its siblings (Fair Tree's S); both null
-- where the lake has no `associations` row for it (the latest snapshot of the cluster's tree
-- counts, so an association removed from the scheduler drops out). usage_ratio = usage_share ÷
-- entitled_share. An account's usage_share and effective_share are of its subtree (its
-- sub-accounts' GPU-hours with its own), as its entitled_share is; its GPU-hours are its own,
-- so the account rows' GPU-hours add up to the cluster's.
-- Waits: jobs that started in the week and asked for GPUs (a CPU job, gpus 0, waits for none;
-- one whose GPUs no record gives counts), start − submit. Waste categories may overlap:
-- low_eff = GPU-hours of jobs whose busy_mean < $low_eff_below, failed = of jobs that failed
-- (FAILED, NODE_FAIL, OUT_OF_MEMORY), unused_limit = gpus (never more than the inventory lists
-- in the cluster) × (time limit − run time) of jobs that ended in the week before their limit;
-- waste = observed − effective (held, seen, not worked).
-- Every association gets a row in each week of data, also with no usage.

-- the GPUs the inventory lists per cluster: a job's unused limit never counts more GPUs than
-- its cluster has, as its allocation does not (job_gpu_intervals)
WITH cluster_gpus AS (
    SELECT
        cluster,
        nullif(
            count(DISTINCT coalesce(node || '/' || CAST(gpu_index AS VARCHAR), gpu_uuid)), 0
        ) AS gpus
    FROM gpus
    GROUP BY cluster
),
-- One row per GPU interval piece (from_intervals 1; gpus: the job's share of them) and one per
-- job (0): a job that started spans its start to its end and carries its CPUs, memory, wait and
-- the unused part of its time limit (its GPUs are its intervals'). Each input is read once, so
-- Spark (which inlines every CTE where it is used) plans it once too.
spans AS (
    SELECT
        cluster,
        job_id,
        1 AS from_intervals,
        gpus * share AS gpus,
        start_e,
        end_e,
        CAST(NULL AS VARCHAR) AS account,
        CAST(NULL AS VARCHAR) AS user,
        CAST(NULL AS DOUBLE) AS cpus,
        CAST(NULL AS DOUBLE) AS mem_gib,
        CAST(NULL AS DOUBLE) AS wait_s,
        CAST(NULL AS BIGINT) AS end_week_n,
        CAST(NULL AS DOUBLE) AS unused_s
    FROM job_gpu_shares
    UNION ALL
    SELECT
        j.cluster,
        j.job_id,
        0 AS from_intervals,
        CAST(NULL AS DOUBLE) AS gpus,
        epoch(j.start_ts) AS start_e,
        greatest(
            epoch(j.start_ts), coalesce(epoch(j.end_ts), d.end_e, epoch(j.updated_ts))
        ) AS end_e,
        j.account,
        j.user,
        coalesce(j.cpus, 0) AS cpus,
        coalesce(j.mem_req_mib, 0) / 1024.0 AS mem_gib,
        CASE WHEN coalesce(greatest(j.gpus_requested, j.gpus) > 0, TRUE) THEN
            greatest(epoch(j.start_ts) - epoch(coalesce(j.submit_ts, j.start_ts)), 0)
        END AS wait_s,
        -- the week a job ended in, where the unused part of its limit counts (not timed out)
        CASE
            WHEN j.end_ts IS NOT NULL AND j.start_ts IS NOT NULL AND j.time_limit_s IS NOT NULL
                AND NOT coalesce(o.timed_out, FALSE)
                THEN CAST(floor((epoch(j.end_ts) - 345600.0) / 604800.0) AS BIGINT)
        END AS end_week_n,
        least(coalesce(j.gpus, 0), coalesce(c.gpus, j.gpus, 0))
            * greatest(j.time_limit_s - (epoch(j.end_ts) - epoch(j.start_ts)), 0) AS unused_s
    FROM jobs_latest AS j
    LEFT JOIN cluster_data_end AS d
        ON d.cluster = j.cluster
    LEFT JOIN cluster_gpus AS c
        ON c.cluster = j.cluster
    LEFT JOIN job_outcomes AS o
        ON o.cluster = j.cluster AND o.job_id = j.job_id
),
-- Each span with its job's account and user (also
-- for a job that never started, whose row spans nothing).
job_spans AS (
    SELECT
        cluster,
        job_id,
        from_intervals,
        gpus,
        start_e,
        end_e,
        cpus,
        mem_gib,
        wait_s,
        end_week_n,
        unused_s,
        coalesce(max(account) OVER (PARTITION BY cluster, job_id), '(none)') AS account,
        coalesce(max(user) OVER (PARTITION BY cluster, job_id), '(none)') AS user
    FROM spans
),
-- Monday 1970-01-05 is 4 days after the epoch: week n starts at n × 604800 + 345600. A job's
-- row also covers the week it ended in, which precedes its start if its end does.
span_weeks AS (
    SELECT
        s.cluster,
        s.job_id,
        CAST(w AS BIGINT) AS week_n,
        s.account,
        s.user,
        s.from_intervals,
        s.gpus,
        s.cpus,
        s.mem_gib,
        s.wait_s,
        s.end_week_n,
        s.unused_s,
        CAST(floor((s.start_e - 345600.0) / 604800.0) AS BIGINT) AS start_week_n,
        (least(s.end_e, w * 604800.0 + 345600.0 + 604800.0)
            - greatest(s.start_e, w * 604800.0 + 345600.0)) AS run_s
    FROM job_spans AS s,
        unnest(generate_series(
            least(CAST(floor((s.start_e - 345600.0) / 604800.0) AS BIGINT), s.end_week_n),
            CAST(floor((s.end_e - 345600.0) / 604800.0) AS BIGINT)
        )) AS weeks(w)
    WHERE s.start_e IS NOT NULL
),
week_parts AS (
    SELECT
        cluster,
        job_id,
        week_n,
        account,
        user,
        CASE
            WHEN from_intervals = 1 THEN run_s * gpus
        END AS alloc_s,
        CASE WHEN from_intervals = 0 AND run_s > 0 THEN run_s * cpus END AS cpu_s,
        CASE WHEN from_intervals = 0 AND run_s > 0 THEN run_s * mem_gib END AS mem_gib_s,
        CASE WHEN from_intervals = 0 AND week_n = start_week_n THEN wait_s END AS wait_s,
        from_intervals = 0 AND week_n = start_week_n AS starts,
        CASE WHEN week_n = end_week_n THEN unused_s END AS unused_s
    FROM span_weeks
),
-- A job's week counts where it held GPUs, started, or ended short of its limit.
job_week AS (
    SELECT
        p.cluster,
        p.job_id,
        p.week_n,
        p.account,
        p.user,
        p.alloc_s,
        p.cpu_s,
        p.mem_gib_s,
        p.wait_s,
        CASE WHEN u.busy_mean < $low_eff_below THEN p.alloc_s ELSE 0 END AS low_eff_s,
        CASE WHEN coalesce(o.failed, FALSE) THEN p.alloc_s ELSE 0 END AS failed_s,
        p.unused_s
    FROM (
        SELECT
            cluster,
            job_id,
            week_n,
            max(account) AS account,
            max(user) AS user,
            coalesce(sum(alloc_s) FILTER (WHERE alloc_s > 0), 0) AS alloc_s,
            coalesce(sum(cpu_s), 0) AS cpu_s,
            coalesce(sum(mem_gib_s), 0) AS mem_gib_s,
            max(wait_s) AS wait_s,
            coalesce(max(unused_s), 0) AS unused_s
        FROM week_parts
        GROUP BY cluster, job_id, week_n
        -- (a CPU job's week: its start, whose wait counts for no GPU, with its CPU-hours)
        HAVING count(*) FILTER (WHERE alloc_s > 0) > 0
            OR bool_or(starts)
            OR count(unused_s) > 0
    ) AS p
    LEFT JOIN job_usage AS u
        ON u.cluster = p.cluster AND u.job_id = p.job_id
    LEFT JOIN job_outcomes AS o
        ON o.cluster = p.cluster AND o.job_id = p.job_id
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
        energy_kwh,
        kg_co2e
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
        sum(energy_kwh) AS energy_kwh,
        sum(kg_co2e) AS kg_co2e
    FROM used_days
    GROUP BY GROUPING SETS ((cluster, week_n, account), (cluster, week_n, account, user))
),
-- The job rows and the usage rows, one after the other (each key at most once in each part).
usage_rows AS (
    SELECT
        cluster,
        week_n,
        level,
        account,
        user,
        jobs,
        jobs_started,
        alloc_gpu_h,
        CAST(NULL AS DOUBLE) AS observed_gpu_h,
        CAST(NULL AS DOUBLE) AS effective_gpu_h,
        CAST(NULL AS DOUBLE) AS idle_gpu_h,
        CAST(NULL AS DOUBLE) AS energy_kwh,
        CAST(NULL AS DOUBLE) AS kg_co2e,
        cpu_h,
        mem_gib_h,
        wait_p50_s,
        wait_p95_s,
        low_eff_gpu_h,
        failed_gpu_h,
        unused_limit_gpu_h
    FROM job_rows
    UNION ALL
    SELECT
        cluster,
        week_n,
        level,
        account,
        user,
        NULL AS jobs,
        NULL AS jobs_started,
        NULL AS alloc_gpu_h,
        observed_gpu_h,
        effective_gpu_h,
        idle_gpu_h,
        energy_kwh,
        kg_co2e,
        NULL AS cpu_h,
        NULL AS mem_gib_h,
        NULL AS wait_p50_s,
        NULL AS wait_p95_s,
        NULL AS low_eff_gpu_h,
        NULL AS failed_gpu_h,
        NULL AS unused_limit_gpu_h
    FROM used_rows
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
-- Each account of the tree with itself and every account above it (up to 5 levels): an account
-- row's shares of use are of its whole subtree, as its entitled share is (Slurm's NormUsage of
-- a parent account counts its sub-accounts' usage).
account_chain AS (
    SELECT
        n.cluster,
        n.account,
        p1.account AS a1,
        p2.account AS a2,
        p3.account AS a3,
        p4.account AS a4,
        p5.account AS a5
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
    WHERE n.user IS NULL
),
account_ancestors AS (
    SELECT cluster, account, account AS ancestor FROM account_chain
    UNION ALL
    SELECT cluster, account, a1 FROM account_chain WHERE a1 IS NOT NULL
    UNION ALL
    SELECT cluster, account, a2 FROM account_chain WHERE a2 IS NOT NULL
    UNION ALL
    SELECT cluster, account, a3 FROM account_chain WHERE a3 IS NOT NULL
    UNION ALL
    SELECT cluster, account, a4 FROM account_chain WHERE a4 IS NOT NULL
    UNION ALL
    SELECT cluster, account, a5 FROM account_chain WHERE a5 IS NOT NULL
),
-- Every association in every week of data.
assoc_rows AS (
    SELECT
        w.cluster,
        w.week_n,
        CASE WHEN s.user IS NULL THEN 'account' ELSE 'user' END AS level,
        s.account,
        s.user,
        s.level_share,
        CASE WHEN s.unshared THEN NULL ELSE s.entitled_share END AS entitled_share
    FROM (SELECT DISTINCT cluster, week_n FROM usage_rows) AS w
    JOIN assoc_share AS s
        ON s.cluster = w.cluster
),
-- One row per key: the job, usage and association parts merged (each has the key at most once).
combined AS (
    SELECT
        cluster,
        week_n,
        level,
        account,
        user,
        coalesce(max(jobs), 0) AS jobs,
        coalesce(max(jobs_started), 0) AS jobs_started,
        coalesce(max(alloc_gpu_h), 0) AS alloc_gpu_h,
        coalesce(max(observed_gpu_h), 0) AS observed_gpu_h,
        coalesce(max(effective_gpu_h), 0) AS effective_gpu_h,
        coalesce(max(idle_gpu_h), 0) AS idle_gpu_h,
        max(energy_kwh) AS energy_kwh,
        max(kg_co2e) AS kg_co2e,
        coalesce(max(cpu_h), 0) AS cpu_h,
        coalesce(max(mem_gib_h), 0) AS mem_gib_h,
        max(level_share) AS level_share,
        max(entitled_share) AS entitled_share,
        max(wait_p50_s) AS wait_p50_s,
        max(wait_p95_s) AS wait_p95_s,
        coalesce(max(low_eff_gpu_h), 0) AS low_eff_gpu_h,
        coalesce(max(failed_gpu_h), 0) AS failed_gpu_h,
        coalesce(max(unused_limit_gpu_h), 0) AS unused_limit_gpu_h
    FROM (
        SELECT
            *,
            CAST(NULL AS DOUBLE) AS level_share,
            CAST(NULL AS DOUBLE) AS entitled_share
        FROM usage_rows
        UNION ALL
        SELECT
            cluster,
            week_n,
            level,
            account,
            user,
            NULL AS jobs,
            NULL AS jobs_started,
            NULL AS alloc_gpu_h,
            NULL AS observed_gpu_h,
            NULL AS effective_gpu_h,
            NULL AS idle_gpu_h,
            NULL AS energy_kwh,
            NULL AS kg_co2e,
            NULL AS cpu_h,
            NULL AS mem_gib_h,
            NULL AS wait_p50_s,
            NULL AS wait_p95_s,
            NULL AS low_eff_gpu_h,
            NULL AS failed_gpu_h,
            NULL AS unused_limit_gpu_h,
            level_share,
            entitled_share
        FROM assoc_rows
    ) AS parts
    GROUP BY cluster, week_n, level, account, user
),
-- An account row's GPU-hours with its sub-accounts' (an account the tree lacks: its own).
subtree AS (
    SELECT
        c.cluster,
        c.week_n,
        a.ancestor AS account,
        sum(c.alloc_gpu_h) AS alloc_gpu_h,
        sum(c.effective_gpu_h) AS effective_gpu_h
    FROM combined AS c
    JOIN account_ancestors AS a
        ON a.cluster = c.cluster AND a.account = c.account
    WHERE c.level = 'account'
    GROUP BY c.cluster, c.week_n, a.ancestor
),
-- The cluster's allocated and effective GPU-hours in the week (its account rows, each once).
totals AS (
    SELECT
        c.*,
        coalesce(s.alloc_gpu_h, c.alloc_gpu_h) AS used_gpu_h,
        coalesce(s.effective_gpu_h, c.effective_gpu_h) AS used_effective_gpu_h,
        sum(CASE WHEN c.level = 'account' THEN c.alloc_gpu_h END)
            OVER (PARTITION BY c.cluster, c.week_n) AS total_alloc_gpu_h,
        sum(CASE WHEN c.level = 'account' THEN c.effective_gpu_h END)
            OVER (PARTITION BY c.cluster, c.week_n) AS total_effective_gpu_h
    FROM combined AS c
    LEFT JOIN subtree AS s
        ON s.cluster = c.cluster
        AND s.week_n = c.week_n
        AND s.account = c.account
        AND c.level = 'account'
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
    c.used_gpu_h / nullif(c.total_alloc_gpu_h, 0) AS usage_share,
    c.used_effective_gpu_h / nullif(c.total_effective_gpu_h, 0) AS effective_share,
    c.level_share,
    c.entitled_share,
    (c.used_gpu_h / nullif(c.total_alloc_gpu_h, 0)) / nullif(c.entitled_share, 0) AS usage_ratio,
    c.wait_p50_s,
    c.wait_p95_s,
    c.low_eff_gpu_h,
    c.failed_gpu_h,
    c.unused_limit_gpu_h,
    greatest(c.observed_gpu_h - c.effective_gpu_h, 0) AS waste_gpu_h,
    c.kg_co2e
FROM totals AS c
ORDER BY c.cluster, week, c.level, c.account, c.user
