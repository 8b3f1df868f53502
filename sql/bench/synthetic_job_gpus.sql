-- synthetic_job_gpus: the allocations that match synthetic_samples (same seed and fleet).
--
-- Grain:   one row per (job, GPU)
-- Reads:   nothing (generated with range())
-- Params:
--   $cluster   cluster name
--   $first_e   the lake's first instant (epoch seconds)
--   $last_e    the lake's end (epoch seconds, exclusive)
--   $gpus      GPUs in the fleet (8 per node)
--   $seed      the seed synthetic_samples used
-- Returns: the job_gpus contract columns
--
-- Job `n<node>-<slot>` holds every GPU of its node over [slot start, slot start + alloc_s).

WITH nodes AS (
    SELECT
        n AS node_n,
        3600 * (2 + CAST(hash(n, $seed) % 11 AS BIGINT)) AS slot_s,
        CAST(
            3600 * (2 + CAST(hash(n, $seed) % 11 AS BIGINT))
            * (55 + CAST(hash(n, $seed + 1) % 40 AS BIGINT)) / 100 AS BIGINT
        ) AS alloc_s,
        CAST(hash(n, $seed + 2) % 3600 AS BIGINT) AS phase_s
    FROM range(CAST($gpus // 8 AS BIGINT)) AS t(n)
),
slots AS (
    SELECT
        n.*,
        slot
    FROM nodes AS n,
        range(
            (CAST($first_e AS BIGINT) - CAST(n.phase_s AS BIGINT)) // CAST(n.slot_s AS BIGINT),
            (CAST($last_e AS BIGINT) - CAST(n.phase_s AS BIGINT)) // CAST(n.slot_s AS BIGINT) + 1
        ) AS s(slot)
)
SELECT
    CAST($cluster AS VARCHAR) AS cluster,
    'n' || CAST(s.node_n AS VARCHAR) || '-' || CAST(s.slot AS VARCHAR) AS job_id,
    'n' || lpad(CAST(s.node_n AS VARCHAR), 5, '0') AS node,
    CAST(g.i AS SMALLINT) AS gpu_index,
    'GPU-synthetic-' || CAST(s.node_n * 8 + g.i AS VARCHAR) AS gpu_uuid,
    make_timestamptz((s.slot * s.slot_s + s.phase_s) * 1000000) AS start_ts,
    make_timestamptz((s.slot * s.slot_s + s.phase_s + s.alloc_s) * 1000000) AS end_ts,
    'sim' AS mapping
FROM slots AS s, range(8) AS g(i)
