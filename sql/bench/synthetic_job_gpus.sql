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
-- Each node is split into lanes of 8, 4, 2 or 1 GPUs (drawn per node as synthetic_samples
-- does); job `n<node>-<lane>-<slot>` holds every GPU of its lane over
-- [slot start, slot start + alloc_s), alloc_s being 60-99 % of the lane's 2-12 h slot.

WITH nodes AS (
    SELECT
        n AS node_n,
        CASE
            WHEN hash(n, $seed + 10) % 1000 < 780 THEN 8
            WHEN hash(n, $seed + 10) % 1000 < 880 THEN 4
            WHEN hash(n, $seed + 10) % 1000 < 945 THEN 2
            ELSE 1
        END AS lane_size
    FROM range(CAST($gpus // 8 AS BIGINT)) AS t(n)
),
lanes AS (
    SELECT
        n.node_n,
        n.lane_size,
        l.lane,
        3600 * (2 + CAST(hash(n.node_n, l.lane, $seed) % 11 AS BIGINT)) AS slot_s,
        CAST(hash(n.node_n, l.lane, $seed + 1) % 40 AS BIGINT) AS held_pct,
        CAST(hash(n.node_n, l.lane, $seed + 2) % 3600 AS BIGINT) AS phase_s
    FROM nodes AS n, range(8) AS l(lane)
    WHERE l.lane < 8 // n.lane_size
),
slots AS (
    SELECT
        l.*,
        CAST(l.slot_s * (60 + l.held_pct) / 100 AS BIGINT) AS alloc_s,
        slot
    FROM lanes AS l,
        range(
            (CAST($first_e AS BIGINT) - l.phase_s) // l.slot_s,
            (CAST($last_e AS BIGINT) - l.phase_s) // l.slot_s + 1
        ) AS s(slot)
)
SELECT
    CAST($cluster AS VARCHAR) AS cluster,
    'n' || CAST(s.node_n AS VARCHAR) || '-' || CAST(s.lane AS VARCHAR) || '-'
    || CAST(s.slot AS VARCHAR) AS job_id,
    'n' || lpad(CAST(s.node_n AS VARCHAR), 5, '0') AS node,
    CAST(s.lane * s.lane_size + r.rank AS SMALLINT) AS gpu_index,
    'GPU-synthetic-' || CAST(s.node_n * 8 + s.lane * s.lane_size + r.rank AS VARCHAR) AS gpu_uuid,
    make_timestamptz((s.slot * s.slot_s + s.phase_s) * 1000000) AS start_ts,
    make_timestamptz((s.slot * s.slot_s + s.phase_s + s.alloc_s) * 1000000) AS end_ts,
    'sim' AS mapping
FROM slots AS s, range(8) AS r(rank)
WHERE r.rank < s.lane_size
