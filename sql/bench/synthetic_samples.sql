-- synthetic_samples: one day of cheap, deterministic GPU samples for the bench's large lakes.
--
-- Grain:   one row per (GPU, sample step) of the day, ~1 % of steps lost
-- Reads:   nothing (generated with range())
-- Params:
--   $cluster      cluster name
--   $day_start_e  the day's first instant (epoch seconds, midnight UTC)
--   $gpus         GPUs in the fleet (8 per node)
--   $interval_s   sampling step in seconds (must divide a day)
--   $seed         changes every drawn value
-- Returns: the gpu_samples contract columns the marts read, typed as the contract
--
-- Each node runs one job after another, all of a node's GPUs together: jobs of a node-specific
-- length (2-12 h) holding the node for 55-94 % of each slot, the rest unallocated, so job_id is
-- set here by the same rule as synthetic_job_gpus (owned iff start <= ts < end). Sample times
-- carry 0-2 s of jitter (they stay within the day), values are hashes: fast, not realistic.

WITH gpus AS (
    SELECT
        g AS gpu,
        g // 8 AS node_n,
        CAST(g % 8 AS SMALLINT) AS gpu_index,
        3600 * (2 + CAST(hash(g // 8, $seed) % 11 AS BIGINT)) AS slot_s,
        CAST(
            3600 * (2 + CAST(hash(g // 8, $seed) % 11 AS BIGINT))
            * (55 + CAST(hash(g // 8, $seed + 1) % 40 AS BIGINT)) / 100 AS BIGINT
        ) AS alloc_s,
        CAST(hash(g // 8, $seed + 2) % 3600 AS BIGINT) AS phase_s
    FROM range($gpus) AS t(g)
),
steps AS (
    SELECT
        g.*,
        (CAST($day_start_e AS BIGINT) + k * CAST($interval_s AS BIGINT)) * 1000
            + CAST(hash(g.gpu, k, $seed) % 2001 AS BIGINT) AS ts_ms,
        CAST(hash(g.gpu, k, $seed + 3) % 1000 AS BIGINT) AS draw
    FROM gpus AS g, range(CAST(86400 // $interval_s AS BIGINT)) AS s(k)
),
owned AS (
    SELECT
        *,
        (ts_ms - phase_s * 1000) // (slot_s * 1000) AS slot,
        (ts_ms - phase_s * 1000) % (slot_s * 1000) < alloc_s * 1000 AS allocated
    FROM steps
    WHERE draw >= 10
)
SELECT
    make_timestamptz(ts_ms * 1000) AS ts,
    CAST($cluster AS VARCHAR) AS cluster,
    'n' || lpad(CAST(node_n AS VARCHAR), 5, '0') AS node,
    gpu_index,
    'GPU-synthetic-' || CAST(gpu AS VARCHAR) AS gpu_uuid,
    'NVIDIA H100 80GB HBM3' AS model,
    CAST($interval_s AS FLOAT) AS interval_s,
    CASE WHEN allocated THEN 'n' || CAST(node_n AS VARCHAR) || '-' || CAST(slot AS VARCHAR) END
        AS job_id,
    CAST(CASE WHEN allocated THEN 60 + draw % 41 ELSE 0 END AS FLOAT) AS gpu_util_pct,
    CAST(CASE WHEN allocated THEN (draw % 97) / 100.0 ELSE 0 END AS FLOAT) AS engine_active,
    CAST(CASE WHEN allocated THEN (draw % 89) / 100.0 ELSE 0 END AS FLOAT) AS sm_active,
    CAST(CASE WHEN allocated THEN (draw % 53) / 100.0 ELSE 0 END AS FLOAT) AS tensor_active,
    CAST(CASE WHEN allocated THEN (draw % 61) / 100.0 ELSE 0 END AS FLOAT) AS dram_active,
    CAST(CASE WHEN allocated THEN 20000 + draw * 50 ELSE 0 END AS FLOAT) AS fb_used_mib,
    CAST(80 + draw % 600 AS FLOAT) AS power_w,
    (CAST(ts_ms AS DOUBLE) / 1000 - 1.7e9) * 250.0 + gpu * 1000.0 AS energy_j,
    CAST(30 + draw % 50 AS FLOAT) AS temp_c,
    'synthetic' AS source
FROM owned
