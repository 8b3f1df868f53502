-- job_gpu_shares: each job's allocated time on each GPU, split evenly among the jobs that held
-- that GPU at the same time (MPS, time-slicing, shards: DESIGN §4 "never count them twice").
--
-- Grain:   one row per (cluster, job_id, slot, piece): a piece is a whole job_gpu_intervals row
--          where no other job's interval overlaps it on its device, else the part of it between
--          two consecutive starts or ends of the intervals overlapping there
-- Reads:   job_gpu_intervals
-- Params:  none
-- Returns: cluster, job_id, slot, device, node, gpu_index, gpus, start_e, end_e, sharers, share
--
-- sharers = the distinct jobs holding the device over the piece; share = 1 / sharers (further
-- divided among one job's rows where it holds the device under two slots, e.g. with and without
-- its UUID, so the job still counts once). Allocated GPU time is (end_e - start_e) * gpus *
-- share: summed over the jobs on a device it never exceeds the time the device was held. A
-- MIG instance is its own device. Only runs of intervals chained by overlaps on one device are
-- cut (one job's overlapping steps are already merged, so an overlap is between two jobs);
-- every other interval, and any of zero length, passes through whole with share 1.0.

WITH ordered AS (
    SELECT
        *,
        CASE
            WHEN start_e < max(end_e) OVER (
                PARTITION BY cluster, device
                ORDER BY start_e, end_e, job_id, slot
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            ) THEN 0
            ELSE 1
        END AS is_new
    FROM job_gpu_intervals
),
runs AS (
    SELECT
        *,
        sum(is_new) OVER (
            PARTITION BY cluster, device
            ORDER BY start_e, end_e, job_id, slot
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS run
    FROM ordered
),
sized AS (
    SELECT
        cluster,
        job_id,
        slot,
        device,
        node,
        gpu_index,
        gpus,
        start_e,
        end_e,
        run,
        count(*) OVER (PARTITION BY cluster, device, run) AS run_rows
    FROM runs
),
-- the times where the set of jobs holding a device changes, within each shared run
bounds AS (
    SELECT cluster, device, run, start_e AS t FROM sized WHERE run_rows > 1
    UNION
    SELECT cluster, device, run, end_e AS t FROM sized WHERE run_rows > 1
),
pieces AS (
    SELECT
        cluster,
        device,
        run,
        t AS start_e,
        lead(t) OVER (PARTITION BY cluster, device, run ORDER BY t) AS end_e
    FROM bounds
),
cut AS (
    SELECT
        s.cluster,
        s.job_id,
        s.slot,
        s.device,
        s.node,
        s.gpu_index,
        s.gpus,
        p.start_e,
        p.end_e,
        count(*) OVER (
            PARTITION BY s.cluster, s.device, p.start_e, s.job_id
        ) AS job_rows,
        count(DISTINCT s.job_id) OVER (PARTITION BY s.cluster, s.device, p.start_e) AS sharers
    FROM sized AS s
    JOIN pieces AS p
        ON p.cluster = s.cluster
        AND p.device = s.device
        AND p.run = s.run
        AND p.start_e >= s.start_e
        AND p.end_e <= s.end_e
    WHERE s.run_rows > 1 AND s.end_e > s.start_e
)
SELECT
    cluster,
    job_id,
    slot,
    device,
    node,
    gpu_index,
    gpus,
    start_e,
    end_e,
    CAST(1 AS BIGINT) AS sharers,
    CAST(1.0 AS DOUBLE) AS share
FROM sized
WHERE run_rows = 1 OR end_e <= start_e
UNION ALL
SELECT
    cluster,
    job_id,
    slot,
    device,
    node,
    gpu_index,
    gpus,
    start_e,
    end_e,
    sharers,
    1.0 / (sharers * job_rows) AS share
FROM cut
