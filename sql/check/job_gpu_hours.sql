-- job_gpu_hours: no job's GPU-hours exceed the GPUs of its nodes × its time inside the data.
--
-- Grain:   one row per violation: a job finding's gpu_h_at_stake (or a GPU or node finding's
--          about one job), or a job_usage row's
--          alloc_gpu_h or observed_gpu_h, above the job's bound
-- Reads:   findings, job_usage, jobs_latest, job_gpus, gpus, gpu_job_buckets, data_extent
-- Params:  none
-- Returns: cluster, subject, detail
--
-- A job's time inside the data runs from its start (or the data's start, if later) to its end,
-- or to the end of the cluster's data while it runs (data_extent): a finding read a month
-- after its lake was made must not count the month. Its own samples widen that span where they
-- reach past it (a job known from its samples' labels, with allocations the record's times do
-- not bound; DESIGN §4 stops a sample's span at its allocation's end), never past the data's
-- end. Its GPUs are all the GPUs of the nodes it
-- ran on (the inventory), or the GPUs it was given where that is more: a stranded-GPU finding
-- may count the node's other GPUs, never more GPUs than the nodes hold. A model's forecast
-- (predicted: what a running job may still hold) may reach to the job's time limit instead.
-- A job the scheduler never recorded (known from its samples' labels alone, or whose record
-- has not landed yet) is bounded by the GPUs its samples name × their span.

WITH node_gpus AS (
    SELECT
        cluster,
        node,
        count(DISTINCT gpu_index) AS gpus
    FROM gpus
    GROUP BY cluster, node
),
job_nodes AS (
    SELECT
        j.cluster,
        j.job_id,
        sum(coalesce(n.gpus, 0)) AS gpus
    FROM (SELECT cluster, job_id, unnest(nodes) AS node FROM jobs_latest) AS j
    LEFT JOIN node_gpus AS n
        ON n.cluster = j.cluster AND n.node = j.node
    GROUP BY j.cluster, j.job_id
),
job_devices AS (
    SELECT
        cluster,
        job_id,
        count(DISTINCT (node, gpu_index)) AS gpus
    FROM job_gpus
    GROUP BY cluster, job_id
),
job_samples AS (
    SELECT
        cluster,
        job_id,
        min(first_e) AS start_e,
        max(interval_end_e) AS end_e
    FROM gpu_job_buckets
    WHERE job_id IS NOT NULL
    GROUP BY cluster, job_id
),
bounds AS (
    SELECT
        j.cluster,
        j.job_id,
        greatest(coalesce(n.gpus, 0), coalesce(j.gpus, 0), coalesce(d.gpus, 0)) AS gpus,
        coalesce(j.time_limit_s, 0) / 3600.0 AS limit_hours,
        greatest(
            0.0,
            least(
                greatest(epoch(coalesce(j.end_ts, x.data_end)), s.end_e),
                epoch(x.data_end)
            )
            - greatest(least(epoch(j.start_ts), s.start_e), epoch(x.data_start))
        ) / 3600.0 AS hours
    FROM jobs_latest AS j
    LEFT JOIN data_extent AS x
        ON x.cluster = j.cluster
    LEFT JOIN job_nodes AS n
        ON n.cluster = j.cluster AND n.job_id = j.job_id
    LEFT JOIN job_devices AS d
        ON d.cluster = j.cluster AND d.job_id = j.job_id
    LEFT JOIN job_samples AS s
        ON s.cluster = j.cluster AND s.job_id = j.job_id
    UNION ALL
    SELECT
        b.cluster,
        b.job_id,
        count(DISTINCT (b.device, b.mig_instance)) AS gpus,
        0.0 AS limit_hours,
        (max(b.interval_end_e) - min(b.first_e)) / 3600.0 AS hours
    FROM gpu_job_buckets AS b
    ANTI JOIN jobs_latest AS j
        ON j.cluster = b.cluster AND j.job_id = b.job_id
    WHERE b.job_id IS NOT NULL
    GROUP BY b.cluster, b.job_id
),
figures AS (
    SELECT
        cluster,
        coalesce(job_id, subject_id) AS job_id,
        'finding ' || finding_id || ' (' || detector || ')' AS subject,
        'GPU-hours at stake' AS figure,
        gpu_h_at_stake AS gpu_h,
        coalesce(predicted, false) AS forecast
    FROM findings
    -- a job's findings, and a GPU's or node's about one job (a straggler costs its job)
    WHERE (subject_kind = 'job' OR (subject_kind IN ('gpu', 'node') AND job_id IS NOT NULL))
        AND gpu_h_at_stake IS NOT NULL
    UNION ALL
    SELECT cluster, job_id, 'job_usage row of job ' || job_id, 'alloc_gpu_h', alloc_gpu_h, false
    FROM job_usage
    UNION ALL
    SELECT
        cluster, job_id, 'job_usage row of job ' || job_id, 'observed_gpu_h', observed_gpu_h, false
    FROM job_usage
),
bounded AS (
    SELECT
        f.*,
        b.job_id IS NOT NULL AS known,
        coalesce(b.gpus, 0) AS gpus,
        coalesce(CASE WHEN f.forecast THEN greatest(b.hours, b.limit_hours) ELSE b.hours END, 0.0)
            AS hours
    FROM figures AS f
    LEFT JOIN bounds AS b
        ON b.cluster = f.cluster AND b.job_id = f.job_id
)
SELECT
    cluster,
    subject,
    printf(
        '%s %.2f exceeds %s %d GPU(s) × %.2f h %s = %.2f GPU-h',
        figure,
        gpu_h,
        CASE WHEN known THEN 'the job''s' ELSE 'an unknown job''s' END,
        gpus,
        hours,
        CASE WHEN forecast THEN 'inside the data or its time limit' ELSE 'inside the data' END,
        gpus * hours
    ) AS detail
FROM bounded
WHERE gpu_h > gpus * hours * (1 + 1e-9) + 1e-6
ORDER BY cluster, subject, figure
