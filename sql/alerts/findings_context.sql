-- findings_context: every finding (its latest version) with what a message about it needs.
--
-- Grain:   one row per (cluster, finding_id)
-- Reads:   findings, data_extent, jobs_latest, job_usage
-- Params:
--   $since  timestamp: only findings (re)detected at or after it
--   $now    timestamp: the alerter's clock (NULL: $since as it is). A cluster whose data end
--           before it has its window moved back by as much: a model stamps a finding with the
--           data's time it was predictable at, a rule with the clock of the run that found it,
--           and a lake whose data stopped a week ago kept the rules' findings and dropped every
--           prediction (the failing-GPU alarms among them)
-- Returns: the finding's columns; the job's name, raw id (a pod's UID), submit time,
--          partition, state, interactive flag, time limit, nodes and GPU activity (null when the finding is not about a known job);
--          the user's rank by GPU-hours at stake among the cluster's users with findings
--          in the window (each job once, at its largest finding's figure).
--
-- A detector may land the same finding_id again as it grows; the newest detected_ts wins
-- (ties: the larger gpu_h_at_stake).

WITH latest AS (
    SELECT f.*
    FROM findings AS f
    LEFT JOIN data_extent AS e
        ON e.cluster = f.cluster
    WHERE f.detected_ts >= CASE
        WHEN $now IS NOT NULL AND e.data_end < $now THEN $since - ($now - e.data_end)
        ELSE $since
    END
    QUALIFY row_number() OVER (
        PARTITION BY f.cluster, f.finding_id
        ORDER BY f.detected_ts DESC, f.gpu_h_at_stake DESC NULLS LAST, f.end_ts DESC NULLS LAST
    ) = 1
),

-- a detector may leave user/account empty on a job finding: take them from the job
owned AS (
    SELECT
        f.*,
        coalesce(f.user, j.user) AS owner,
        coalesce(f.account, j.account) AS owner_account
    FROM latest AS f
    LEFT JOIN jobs_latest AS j
        ON f.cluster = j.cluster AND f.job_id = j.job_id
),

-- a subject (a job) counts once, at its largest detector's figure: its findings of several
-- detectors (an idle rule, a model's forecasts at 15 and 30 minutes, a memory hold) are views
-- of the same GPU-hours, not waste to add up; one detector's several findings about it (its
-- slow GPUs) share its loss, and are summed. A finding about the user themselves (`user NAME`:
-- their last days' efficiency) counts their jobs' waste too: the larger of it and the sum of
-- their other subjects (added, a user was told of 60.6 GPU-hours at stake of 51.1 held;
-- app/alerts/render.py's at_stake_total counts a message's total the same way)
user_totals AS (
    SELECT
        cluster,
        user,
        greatest(
            coalesce(max(gpu_h) FILTER (WHERE subject = 'user ' || user), 0),
            coalesce(sum(gpu_h) FILTER (WHERE subject <> 'user ' || user), 0)
        ) AS user_gpu_h_at_stake
    FROM (
        SELECT
            cluster,
            user,
            subject,
            max(gpu_h) AS gpu_h
        FROM (
            SELECT
                cluster,
                owner AS user,
                coalesce('job ' || job_id, subject_kind || ' ' || subject_id) AS subject,
                detector,
                sum(coalesce(gpu_h_at_stake, 0)) AS gpu_h
            FROM owned
            WHERE owner IS NOT NULL
            GROUP BY cluster, owner, subject, detector
        ) AS per_detector
        GROUP BY cluster, user, subject
    ) AS per_subject
    GROUP BY cluster, user
),

ranked AS (
    SELECT
        cluster,
        user,
        user_gpu_h_at_stake,
        rank() OVER (PARTITION BY cluster ORDER BY user_gpu_h_at_stake DESC) AS user_rank,
        count(*) OVER (PARTITION BY cluster) AS users_ranked
    FROM user_totals
)

SELECT
    f.cluster,
    f.finding_id,
    f.detector,
    f.severity,
    f.subject_kind,
    f.subject_id,
    f.job_id,
    f.owner AS user,
    f.owner_account AS account,
    f.node,
    f.gpu_uuid,
    f.start_ts,
    f.end_ts,
    f.detected_ts,
    f.predicted,
    f.score,
    f.gpu_h_at_stake,
    f.message,
    f.evidence,
    j.job_name,
    j.job_id_raw,
    j.submit_ts AS job_submit_ts,
    j.partition,
    j.state AS job_state,
    j.interactive,
    j.start_ts AS job_start_ts,
    j.end_ts AS job_end_ts,
    j.time_limit_s,
    j.gpus,
    j.nodes,
    u.alloc_gpu_h,
    u.idle_gpu_h,
    u.busy_mean,
    u.gpu_util_pct_mean,
    u.sm_active_mean,
    u.fb_used_mib_max,
    u.gpus_never_active,
    r.user_rank,
    r.users_ranked,
    r.user_gpu_h_at_stake
FROM owned AS f
LEFT JOIN jobs_latest AS j
    ON f.cluster = j.cluster AND f.job_id = j.job_id
LEFT JOIN job_usage AS u
    ON f.cluster = u.cluster AND f.job_id = u.job_id
LEFT JOIN ranked AS r
    ON f.cluster = r.cluster AND f.owner = r.user
ORDER BY f.cluster, f.detected_ts, f.finding_id
