-- scope_jobs: the jobs whose job_usage and job_outcomes rows a change of some days can alter,
-- and every job usage_daily reads on those days.
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   scope_days (cluster, date, start_e, end_e: the days to update), changed_index (the
--          summary_index rows of the changed days, before and after), summary_index (after),
--          job_gpus, jobs_latest, moved_ends (cluster: the clusters whose data end moved),
--          late_jobs (cluster, job_id: the jobs in new scheduler batches)
-- Params:  none
-- Returns: cluster, job_id
--
-- A job is in scope when it had or has samples on a changed day, has samples on a day to
-- update (or a sample the day before that runs into it), holds an allocation overlapping a day to update (open allocations end at the data's
-- end), ran over one (a job without job_gpus rows holds its GPUs over its run), is still
-- running in a cluster whose data end moved (its allocated time runs to it), or has a late
-- scheduler record. A job's share of a GPU held by several jobs at once
-- (job_gpu_shares) changes only where a sharer's interval changed: an open allocation's, over
-- the days between the old and the new end of data (or from its start, where the cluster's
-- data began or ended), or a late record's job's, over the days it held GPUs (late_days); those
-- are days to update, so every such sharer holds an allocation overlapping one and is in scope
-- already.

SELECT cluster, job_id
FROM changed_index
WHERE job_id IS NOT NULL
UNION
SELECT i.cluster, i.job_id
FROM summary_index AS i
JOIN scope_days AS d
    ON d.cluster = i.cluster AND d.date = i.date
WHERE i.job_id IS NOT NULL
UNION
-- a sample of the day before that runs past midnight counts on the day (usage_daily)
SELECT i.cluster, i.job_id
FROM summary_index AS i
JOIN scope_days AS d
    ON d.cluster = i.cluster AND d.date = i.date + 1
WHERE i.job_id IS NOT NULL AND i.last_end_e > d.start_e
UNION
SELECT g.cluster, g.job_id
FROM job_gpus AS g
JOIN scope_days AS d
    ON d.cluster = g.cluster
WHERE epoch(g.start_ts) < d.end_e
    AND (g.end_ts IS NULL OR epoch(g.end_ts) >= d.start_e)
UNION
SELECT j.cluster, j.job_id
FROM jobs_latest AS j
JOIN scope_days AS d
    ON d.cluster = j.cluster
WHERE epoch(j.start_ts) < d.end_e
    AND (j.end_ts IS NULL OR epoch(j.end_ts) >= d.start_e)
UNION
SELECT g.cluster, g.job_id
FROM job_gpus AS g
JOIN moved_ends AS m
    ON m.cluster = g.cluster
-- (an end after tomorrow is the job's, open while it runs: job_gpu_intervals)
WHERE g.end_ts IS NULL OR g.end_ts >= date_trunc('day', now()) + INTERVAL 2 DAY
UNION
SELECT j.cluster, j.job_id
FROM jobs_latest AS j
JOIN moved_ends AS m
    ON m.cluster = j.cluster
WHERE j.start_ts IS NOT NULL AND j.end_ts IS NULL
UNION
SELECT cluster, job_id
FROM late_jobs
