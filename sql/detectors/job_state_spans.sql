-- job_state_spans: per job, how long all its GPUs were idle, held memory without compute, or hung.
--
-- Grain:   one row per (cluster, job_id, state) with state in ('idle', 'memory_hold', 'hung')
-- Reads:   gpu_job_buckets, gpus, gpu_models, jobs_latest
-- Params:
--   $since                ignore buckets before this time (TIMESTAMP, UTC)
--   $idle_active_frac     a bucket is idle when its GPUs were active less than this share of it
--   $idle_util_below_pct  ... and their mean GPU_UTIL is below this (0-100; hung jobs show 100)
--   $hold_fb_min_frac     an idle bucket holds memory when a GPU used >= this share of its memory
--   $hung_util_min_pct    a bucket is hung when mean GPU_UTIL >= this (0-100) ...
--   $hung_sm_max          ... while SM activity <= this (0-1) ...
--   $hung_power_max_frac  ... or, where SM activity is not reported, power <= this share of the
--                         way from idle power to the board limit
--   $min_span_s           shortest run of consecutive same-state buckets that counts
-- Returns: cluster, job_id, user, account, job_start_ts, job_end_ts, gpus, state, spans,
--          start_ts, end_ts, longest_s, state_s, state_gpu_h, observed_s, util_mean, sm_mean,
--          fb_frac_max, power_frac_mean
--
-- A bucket's state is the job's across all its GPUs that reported in that bucket: idle means
-- every one of them idle. Runs are consecutive observed buckets in one state (a telemetry gap
-- does not break a run). `state_s` sums the qualifying runs; `longest_s` is the longest run;
-- `observed_s` is the job's whole observed time, so state_s = observed_s means "the whole run".

WITH limits AS (
    SELECT
        g.cluster,
        g.node,
        g.gpu_index,
        coalesce(g.fb_total_mib, m.fb_total_mib) AS fb_total_mib,
        coalesce(g.power_limit_w, m.power_limit_w) AS power_limit_w,
        m.idle_power_w
    FROM gpus AS g
    LEFT JOIN gpu_models AS m
        ON m.model = g.model
),
per_device AS (
    SELECT
        b.cluster,
        b.job_id,
        b.bucket,
        b.observed_s,
        b.last_end_e,
        b.active_s,
        b.util_sum,
        b.util_known_s,
        b.sm_sum,
        b.sm_known_s,
        b.power_sum,
        b.power_known_s,
        b.fb_used_mib_max / nullif(coalesce(l.fb_total_mib, m.fb_total_mib), 0) AS fb_frac,
        coalesce(l.power_limit_w, m.power_limit_w) AS limit_w,
        coalesce(l.idle_power_w, m.idle_power_w) AS idle_w
    FROM gpu_job_buckets AS b
    LEFT JOIN limits AS l
        ON l.cluster = b.cluster AND l.node = b.node AND l.gpu_index = b.gpu_index
    LEFT JOIN gpu_models AS m
        ON m.model = b.model
    WHERE b.job_id IS NOT NULL
        AND b.bucket >= $since
        AND b.observed_s > 0
),
per_bucket AS (
    SELECT
        cluster,
        job_id,
        bucket,
        count(*) AS devices,
        sum(observed_s) AS observed_s,
        max(last_end_e) AS last_end_e,
        sum(active_s) AS active_s,
        sum(util_sum) / nullif(sum(util_known_s), 0) AS util_mean,
        sum(sm_sum) / nullif(sum(sm_known_s), 0) AS sm_mean,
        max(fb_frac) AS fb_frac_max,
        (sum(power_sum) / nullif(sum(power_known_s), 0) - avg(idle_w))
            / nullif(avg(limit_w) - avg(idle_w), 0) AS power_frac
    FROM per_device
    GROUP BY cluster, job_id, bucket
),
classified AS (
    SELECT
        *,
        CASE
            WHEN util_mean >= $hung_util_min_pct
                AND (
                    sm_mean <= $hung_sm_max
                    OR (sm_mean IS NULL AND power_frac <= $hung_power_max_frac)
                )
                THEN 'hung'
            WHEN active_s < $idle_active_frac * observed_s
                AND coalesce(util_mean, 0) < $idle_util_below_pct
                AND coalesce(fb_frac_max, 0) >= $hold_fb_min_frac
                THEN 'memory_hold'
            WHEN active_s < $idle_active_frac * observed_s
                AND coalesce(util_mean, 0) < $idle_util_below_pct
                THEN 'idle'
            ELSE 'busy'
        END AS state
    FROM per_bucket
),
numbered AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY cluster, job_id ORDER BY bucket)
            - row_number() OVER (PARTITION BY cluster, job_id, state ORDER BY bucket) AS run
    FROM classified
),
runs AS (
    SELECT
        cluster,
        job_id,
        state,
        run,
        min(bucket) AS start_ts,
        max(last_end_e) AS end_e,
        sum(observed_s / devices) AS run_s,
        sum(observed_s) AS run_gpu_s
    FROM numbered
    GROUP BY cluster, job_id, state, run
),
job_totals AS (
    SELECT
        cluster,
        job_id,
        sum(observed_s / devices) AS observed_s
    FROM classified
    GROUP BY cluster, job_id
),
state_stats AS (
    SELECT
        cluster,
        job_id,
        state,
        avg(util_mean) AS util_mean,
        avg(sm_mean) AS sm_mean,
        max(fb_frac_max) AS fb_frac_max,
        avg(power_frac) AS power_frac_mean
    FROM classified
    WHERE state <> 'busy'
    GROUP BY cluster, job_id, state
),
spans AS (
    SELECT
        cluster,
        job_id,
        state,
        count(*) AS spans,
        min(start_ts) AS start_ts,
        max(end_e) AS end_e,
        max(run_s) AS longest_s,
        sum(run_s) AS state_s,
        sum(run_gpu_s) / 3600.0 AS state_gpu_h
    FROM runs
    WHERE state <> 'busy'
        AND run_s >= $min_span_s
    GROUP BY cluster, job_id, state
)
SELECT
    s.cluster,
    s.job_id,
    j.user,
    j.account,
    j.start_ts AS job_start_ts,
    j.end_ts AS job_end_ts,
    j.gpus,
    s.state,
    s.spans,
    s.start_ts,
    to_timestamp(s.end_e) AS end_ts,
    s.longest_s,
    s.state_s,
    s.state_gpu_h,
    t.observed_s,
    st.util_mean,
    st.sm_mean,
    st.fb_frac_max,
    st.power_frac_mean
FROM spans AS s
JOIN job_totals AS t
    ON t.cluster = s.cluster AND t.job_id = s.job_id
JOIN state_stats AS st
    ON st.cluster = s.cluster AND st.job_id = s.job_id AND st.state = s.state
LEFT JOIN jobs_latest AS j
    ON j.cluster = s.cluster AND j.job_id = s.job_id
ORDER BY s.cluster, s.job_id, s.state
