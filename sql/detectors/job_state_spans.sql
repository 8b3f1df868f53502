-- job_state_spans: per job, how long it was idle, held memory without compute, or hung (duty cycle).
--
-- Grain:   one row per (cluster, job_id, state) with state in ('idle', 'memory_hold', 'hung')
-- Reads:   gpu_job_buckets, gpus, gpu_models, jobs_latest, job_gpus
-- Params:
--   $since                ignore buckets before this time (TIMESTAMP, UTC)
--   $idle_window_s        the window (seconds) over which a job counts as idle
--   $hold_window_s        ... as holding memory without compute
--   $hung_window_s        ... as hung
--   $idle_work_max_frac        a window is still (idle or memory held) when the job's GPUs did at most
--                         this much work on average (0-1): SM/engine activity, else power above
--                         idle as a share of the way to the board limit, else GPU_UTIL / 100
--   $idle_real_work_max_frac   ... and at most this in buckets whose work per active second was above
--   $idle_kernel_max_frac      (a small kernel's intensity: below it, a bucket's activity is a health
--                         check or a monitoring agent, not work)
--   $hold_fb_min_frac     a still window holds memory when a GPU used >= this share of its memory
--   $hung_util_min_pct    a bucket is hung when mean GPU_UTIL >= this (0-100) ...
--   $hung_sm_max          ... while SM activity <= this (0-1) ...
--   $hung_power_max_frac  ... or, where SM activity is not reported, power <= this share of the
--                         way from idle power to the board limit
--   $hung_duty_min_frac        a window is hung when at least this share of it was hung buckets
--   $min_span_s           shortest run of same-state buckets that counts
-- Returns: cluster, job_id, user, account, job_start_ts, job_end_ts, gpus, state, spans,
--          start_ts, end_ts, longest_s, state_s, state_gpu_h, observed_s, windowed, signal,
--          work_mean, util_mean, sm_mean, fb_frac_max, power_frac_mean, episode_start_e,
--          observed_end_e
--
-- Duty cycle, not unbroken runs: a 5-minute bucket belongs to a state when some window of that
-- state's length holding it qualifies (its mean work, or its share of hung buckets), so a short
-- kernel every 20 minutes (a health check, a monitoring agent, a notebook's poll) does not break
-- an idle hour, while a service busy 60 % of the time is never still. A job whose whole observed
-- run is still (shorter than a window, too) has every bucket in that state. `windowed` says a
-- full window qualified. `signal` names what the work was read from: 'sm_active' (profiling
-- fields), 'power' (no profiling fields: power above idle) or 'gpu_util' (neither).
-- A telemetry gap does not break a run; `state_s` sums the qualifying runs, `longest_s` is the
-- longest, `observed_s` is the job's whole observed time (state_s = observed_s: its whole run).
-- `episode_start_e` is where the latest run began, `observed_end_e` the end of the job's last
-- observed bucket: the run is still going on where it ends there (the alerts' escalation counts
-- the latest run alone, and only while it goes on: a job busy again is not cancelled).
-- job_start_ts is the scheduler record's start, else its first allocation's: a finding's id
-- hashes it, and a record that lands after the samples must not make the finding anew.

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
        b.effective_s,
        b.busy_known_s,
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
-- each device's work in device-seconds, from the best field it reports: busy (DESIGN §4) where
-- a profiling field gives it (SM activity, or engine activity alone: its busy is known for more
-- time than GPU_UTIL is)
device_work AS (
    SELECT
        *,
        CASE
            WHEN sm_known_s > 0 OR busy_known_s > coalesce(util_known_s, 0) THEN 'sm_active'
            WHEN power_known_s > 0 AND limit_w > idle_w THEN 'power'
            ELSE 'gpu_util'
        END AS signal,
        CASE
            WHEN sm_known_s > 0 OR busy_known_s > coalesce(util_known_s, 0) THEN effective_s
            WHEN power_known_s > 0 AND limit_w > idle_w
                THEN greatest(power_sum / power_known_s - idle_w, 0) / (limit_w - idle_w)
                    * observed_s
            ELSE coalesce(util_sum, 0) / 100
        END AS work_s
    FROM per_device
),
per_bucket AS (
    SELECT
        cluster,
        job_id,
        bucket,
        epoch(bucket) AS bucket_e,
        count(*) AS devices,
        sum(observed_s) AS observed_s,
        sum(observed_s) / count(*) AS wall_s,
        max(last_end_e) AS last_end_e,
        sum(work_s) AS work_s,
        sum(active_s) AS active_s,
        -- the weakest signal any of its devices had
        max(CASE signal WHEN 'gpu_util' THEN 2 WHEN 'power' THEN 1 ELSE 0 END) AS signal_rank,
        sum(util_sum) / nullif(sum(util_known_s), 0) AS util_mean,
        coalesce(sum(util_sum), 0) AS util_sum,
        sum(util_known_s) AS util_known_s,
        sum(sm_sum) / nullif(sum(sm_known_s), 0) AS sm_mean,
        max(fb_frac) AS fb_frac_max,
        (sum(power_sum) / nullif(sum(power_known_s), 0) - avg(idle_w))
            / nullif(avg(limit_w) - avg(idle_w), 0) AS power_frac
    FROM device_work
    GROUP BY cluster, job_id, bucket
),
flagged AS (
    SELECT
        *,
        CASE
            WHEN util_mean >= $hung_util_min_pct
                AND (
                    sm_mean <= $hung_sm_max
                    OR (sm_mean IS NULL AND power_frac <= $hung_power_max_frac)
                )
                THEN observed_s
            ELSE 0
        END AS hung_s,
        -- work at more than a small kernel's intensity while active (a health check's or a
        -- monitoring agent's kernel keeps few SMs busy and draws little power); none without
        -- activity (power a little above the idle figure is no work)
        CASE
            WHEN active_s > 0 AND work_s > $idle_kernel_max_frac * active_s THEN work_s
            ELSE 0
        END AS real_work_s
    FROM per_bucket
),
-- the window of each state's length ending at each bucket (bucket starts within it)
windows AS (
    SELECT
        *,
        sum(observed_s) OVER idle_w AS i_obs,
        sum(wall_s) OVER idle_w AS i_wall,
        sum(work_s) OVER idle_w AS i_work,
        sum(real_work_s) OVER idle_w AS i_real,
        sum(util_sum) OVER idle_w AS i_util,
        sum(util_known_s) OVER idle_w AS i_util_known,
        max(fb_frac_max) OVER idle_w AS i_fb,
        min(bucket_e) OVER idle_w AS i_first,
        sum(observed_s) OVER hold_w AS h_obs,
        sum(wall_s) OVER hold_w AS h_wall,
        sum(work_s) OVER hold_w AS h_work,
        sum(real_work_s) OVER hold_w AS h_real,
        sum(util_sum) OVER hold_w AS h_util,
        sum(util_known_s) OVER hold_w AS h_util_known,
        max(fb_frac_max) OVER hold_w AS h_fb,
        min(bucket_e) OVER hold_w AS h_first,
        sum(observed_s) OVER hung_w AS g_obs,
        sum(wall_s) OVER hung_w AS g_wall,
        sum(hung_s) OVER hung_w AS g_hung,
        min(bucket_e) OVER hung_w AS g_first
    FROM flagged
    WINDOW
        idle_w AS (
            PARTITION BY cluster, job_id ORDER BY bucket_e
            RANGE BETWEEN $idle_window_s - 1 PRECEDING AND CURRENT ROW
        ),
        hold_w AS (
            PARTITION BY cluster, job_id ORDER BY bucket_e
            RANGE BETWEEN $hold_window_s - 1 PRECEDING AND CURRENT ROW
        ),
        hung_w AS (
            PARTITION BY cluster, job_id ORDER BY bucket_e
            RANGE BETWEEN $hung_window_s - 1 PRECEDING AND CURRENT ROW
        )
),
-- A window is the buckets that start less than its length before this one (a bucket starts
-- at bucket_e): 12 of 5 minutes for an hour. With the bucket starting exactly an hour before,
-- an hour idle after work held that busy bucket in every window and took 65 minutes to flag.
-- a window qualifies when it spans the state's length (its first bucket starts at least that
-- long before this bucket ends), at least half of it was observed (an exporter outage does not
-- leave a few resting buckets to speak for the hour) and its duty cycle says so. A window whose
-- GPU_UTIL averaged 50 % or more is never still: a kernel ran most of the time (busy, or hung:
-- hung is its own state, whatever its thresholds, so raising them never makes a job idle)
qualified AS (
    SELECT
        *,
        (last_end_e - i_first >= $idle_window_s
            AND i_wall >= 0.5 * $idle_window_s
            AND i_work <= $idle_work_max_frac * i_obs
            AND i_real <= $idle_real_work_max_frac * i_obs
            AND (i_util < 50 * i_util_known OR coalesce(i_util_known, 0) = 0)
            AND coalesce(i_fb, 0) < $hold_fb_min_frac) AS q_idle,
        (last_end_e - h_first >= $hold_window_s
            AND h_wall >= 0.5 * $hold_window_s
            AND h_work <= $idle_work_max_frac * h_obs
            AND h_real <= $idle_real_work_max_frac * h_obs
            AND (h_util < 50 * h_util_known OR coalesce(h_util_known, 0) = 0)
            AND coalesce(h_fb, 0) >= $hold_fb_min_frac) AS q_hold,
        (last_end_e - g_first >= $hung_window_s
            AND g_wall >= 0.5 * $hung_window_s
            AND g_hung >= $hung_duty_min_frac * g_obs) AS q_hung
    FROM windows
),
job_totals AS (
    SELECT
        cluster,
        job_id,
        sum(observed_s / devices) AS observed_s,
        sum(work_s) <= $idle_work_max_frac * sum(observed_s)
            AND sum(real_work_s) <= $idle_real_work_max_frac * sum(observed_s)
            AND (sum(util_sum) < 50 * sum(util_known_s) OR coalesce(sum(util_known_s), 0) = 0)
            AS whole_still,
        coalesce(max(fb_frac_max), 0) >= $hold_fb_min_frac AS whole_holds,
        max(last_end_e) AS observed_end_e
    FROM flagged
    GROUP BY cluster, job_id
),
-- a bucket is in a state when a qualifying window holds it (one of the windows ending within one
-- length after it), or when the job's whole run is still, and it is itself in that state (no
-- real work; hung)
covered AS (
    SELECT
        q.*,
        coalesce(max(CAST(q.q_idle AS INTEGER)) OVER idle_f, 0) = 1 AS c_idle,
        coalesce(max(CAST(q.q_hold AS INTEGER)) OVER hold_f, 0) = 1 AS c_hold,
        coalesce(max(CAST(q.q_hung AS INTEGER)) OVER hung_f, 0) = 1 AS c_hung,
        t.whole_still,
        t.whole_holds,
        row_number() OVER (PARTITION BY q.cluster, q.job_id ORDER BY q.bucket_e) AS k
    FROM qualified AS q
    JOIN job_totals AS t
        ON t.cluster = q.cluster AND t.job_id = q.job_id
    WINDOW
        idle_f AS (
            PARTITION BY q.cluster, q.job_id ORDER BY q.bucket_e
            RANGE BETWEEN CURRENT ROW AND $idle_window_s - 1 FOLLOWING
        ),
        hold_f AS (
            PARTITION BY q.cluster, q.job_id ORDER BY q.bucket_e
            RANGE BETWEEN CURRENT ROW AND $hold_window_s - 1 FOLLOWING
        ),
        hung_f AS (
            PARTITION BY q.cluster, q.job_id ORDER BY q.bucket_e
            RANGE BETWEEN CURRENT ROW AND $hung_window_s - 1 FOLLOWING
        )
),
states AS (
    SELECT
        c.*,
        s.state,
        CASE s.state
            WHEN 'idle' THEN (c.c_idle OR (c.whole_still AND NOT c.whole_holds))
                AND c.real_work_s <= $idle_real_work_max_frac * c.observed_s
            WHEN 'memory_hold' THEN (c.c_hold OR (c.whole_still AND c.whole_holds))
                AND c.real_work_s <= $idle_real_work_max_frac * c.observed_s
            ELSE c.c_hung AND c.hung_s > 0
        END AS in_state,
        CASE s.state
            WHEN 'idle' THEN c.q_idle
            WHEN 'memory_hold' THEN c.q_hold
            ELSE c.q_hung
        END AS window_ok
    FROM covered AS c
    CROSS JOIN (VALUES ('idle'), ('memory_hold'), ('hung')) AS s (state)
),
-- runs of consecutive buckets in a state: the bucket's ordinal minus its ordinal in the state
numbered AS (
    SELECT
        *,
        k - row_number() OVER (PARTITION BY cluster, job_id, state ORDER BY bucket) AS run
    FROM states
    WHERE in_state
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
state_stats AS (
    SELECT
        cluster,
        job_id,
        state,
        bool_or(window_ok) AS windowed,
        CASE max(signal_rank) WHEN 2 THEN 'gpu_util' WHEN 1 THEN 'power' ELSE 'sm_active' END
            AS signal,
        sum(work_s) / nullif(sum(observed_s), 0) AS work_mean,
        avg(util_mean) AS util_mean,
        avg(sm_mean) AS sm_mean,
        max(fb_frac_max) AS fb_frac_max,
        avg(power_frac) AS power_frac_mean
    FROM numbered
    GROUP BY cluster, job_id, state
),
spans AS (
    SELECT
        cluster,
        job_id,
        state,
        count(*) AS spans,
        min(start_ts) AS start_ts,
        max(start_ts) AS episode_start_ts,
        max(end_e) AS end_e,
        max(run_s) AS longest_s,
        sum(run_s) AS state_s,
        sum(run_gpu_s) / 3600.0 AS state_gpu_h
    FROM runs
    WHERE run_s >= $min_span_s
    GROUP BY cluster, job_id, state
)
SELECT
    s.cluster,
    s.job_id,
    j.user,
    j.account,
    coalesce(j.start_ts, h.start_ts) AS job_start_ts,
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
    st.windowed,
    st.signal,
    st.work_mean,
    st.util_mean,
    st.sm_mean,
    st.fb_frac_max,
    st.power_frac_mean,
    epoch(s.episode_start_ts) AS episode_start_e,
    t.observed_end_e
FROM spans AS s
JOIN job_totals AS t
    ON t.cluster = s.cluster AND t.job_id = s.job_id
JOIN state_stats AS st
    ON st.cluster = s.cluster AND st.job_id = s.job_id AND st.state = s.state
LEFT JOIN jobs_latest AS j
    ON j.cluster = s.cluster AND j.job_id = s.job_id
LEFT JOIN (
    SELECT
        cluster,
        job_id,
        min(start_ts) AS start_ts
    FROM job_gpus
    GROUP BY cluster, job_id
) AS h
    ON h.cluster = s.cluster AND h.job_id = s.job_id
ORDER BY s.cluster, s.job_id, s.state
