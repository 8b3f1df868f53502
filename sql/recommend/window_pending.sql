-- window_pending: the GPU jobs that waited in the window and did not start in it, and how long
-- they waited there — demand the scheduler did not meet, which the jobs that started leave out.
--
-- Grain:   one row per (cluster, job_id) queued at some time in [$since, $until) that did not
--          start before $until
-- Reads:   jobs_latest, data_extent
-- Params:
--   $since  start of the window (TIMESTAMP, UTC)
--   $until  end of the window (exclusive)
-- Returns: cluster, job_id, account, gpus, submit_e, waited_until_e (epoch seconds)
--
-- A job waits from its submit (or the window's start) until it starts, ends (cancelled in the
-- queue) or the window or its cluster's data end (never the wall clock), whichever is first.
-- Its GPUs are those it asked for; a CPU job (0 GPUs) waits for none.

WITH data_end AS (
    SELECT
        cluster,
        epoch(data_end) AS end_e
    FROM data_extent
),
queued AS (
    SELECT
        j.cluster,
        j.job_id,
        j.account,
        coalesce(j.gpus_requested, j.gpus, 1) AS gpus,
        greatest(epoch(j.submit_ts), epoch($since)) AS submit_e,
        least(
            coalesce(epoch(j.start_ts), epoch(j.end_ts), epoch($until)),
            coalesce(e.end_e, epoch($until)),
            epoch($until)
        ) AS waited_until_e
    FROM jobs_latest AS j
    LEFT JOIN data_end AS e
        ON e.cluster = j.cluster
    WHERE j.submit_ts < $until
        AND (j.start_ts IS NULL OR j.start_ts >= $until)
        AND coalesce(greatest(j.gpus_requested, j.gpus) > 0, TRUE)  -- (as the report's)
)
SELECT *
FROM queued
WHERE waited_until_e > submit_e
ORDER BY cluster, job_id
