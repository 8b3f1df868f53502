-- synthetic_samples: one day of deterministic GPU samples drawn from the simulator's distributions.
--
-- Grain:   one row per (GPU, sample step) of the day, less lost scrapes and exporter outages
-- Reads:   nothing (generated with range())
-- Params:
--   $cluster      cluster name
--   $day_start_e  the day's first instant (epoch seconds, midnight UTC)
--   $gpus         GPUs in the fleet (8 per node)
--   $interval_s   sampling step in seconds (must divide a day)
--   $seed         changes every drawn value
-- Returns: the gpu_samples contract columns the simulator fills, typed as the contract
--
-- The simulator (collector/sim/telemetry.py, default setting) draws ~250 k samples/s, far too
-- few for the bench's 350 M-sample lakes; this draws the same per-sample values in DuckDB, each
-- random number a slice of a hash of (GPU, step, $seed), so a lake is reproducible.
--
-- Allocations (the same rule as synthetic_job_gpus, owned iff start <= ts < end): each node is
-- split into lanes of 8, 4, 2 or 1 GPUs (78/10/6.5/5.5 % of nodes: the simulator's share of
-- GPU-time by job size, multi-node jobs counted as 8); each lane runs one job after another,
-- slots of a lane-specific 2-12 h held for 60-99 % of each (~80 % allocated, as the simulator).
-- Each job draws its archetype with the simulator's share of allocated GPU-time (per mille:
-- pretrain 629, inference 92, finetune 80, input_bound 44, hung 43, partial 38, notebook 26,
-- idle 19, overallocated 15, memory_hold 12, debug 2; 4,096 GPUs × 7 days simulated) and a
-- level in 0-1, then every sample follows that archetype's regime as the simulator writes it:
-- training near GPU_UTIL 100 with SM activity by level, stragglers, hourly checkpoints and a
-- start-up phase; input-bound bursts; inference following the hour of day; notebooks busy 7 %
-- of the time; idle and memory-holding jobs at zero; partially idle jobs with only 1-2 working
-- ranks; hung jobs that stop at 15-50 % of their run with GPU_UTIL stuck at 100. Power,
-- memory, temperature and clocks follow from the activity and the GPU model (H100 80GB; fleets
-- over 128 GPUs have an A100 island of one node in eight). One node in sixteen has no
-- profiling fields (NULL, as the simulator's); another runs hot (0.85 × power, +16 °C) on
-- 60 % of afternoons; 0.3 % of scrapes are lost and a node in forty has a 5-40 minute
-- exporter outage each day. Scrape times: each node at its own offset within the step, with
-- < 0.6 s of jitter, kept within the step. PCIe and NVLink rates are rounded to 1 MB/s (the
-- simulator's are not) so a month of them fits on a small disk. Left out: GPU failures and
-- their health counters (XID, ECC, remaps: 0), multi-node jobs, and the energy counter's
-- running sum: energy_j advances at a constant 315 W (H100) or 185 W (A100), the fleet's
-- mean draw, each GPU from its own offset (a running sum needs a window over the whole day).

WITH gpus AS (
    SELECT
        g AS gpu,
        g // 8 AS node_n,
        CAST(g % 8 AS SMALLINT) AS gpu_index,
        'n' || lpad(CAST(g // 8 AS VARCHAR), 5, '0') AS node,
        'GPU-synthetic-' || CAST(g AS VARCHAR) AS gpu_uuid,
        CASE
            WHEN hash(g // 8, $seed + 10) % 1000 < 780 THEN 8
            WHEN hash(g // 8, $seed + 10) % 1000 < 880 THEN 4
            WHEN hash(g // 8, $seed + 10) % 1000 < 945 THEN 2
            ELSE 1
        END AS lane_size,
        $gpus > 128 AND g // 8 >= $gpus // 8 - $gpus // 64 AS a100,
        (g // 8 + $seed) % 16 = 0 AS no_profiling,
        CAST(abs(sin((g // 8) * 12.9898 + 78.233)) * $interval_s * 1000 AS BIGINT) AS scrape_ms,
        CAST($day_start_e AS BIGINT) // 86400 AS day_n,
        1e8 + CAST(hash(g, $seed + 14) % 4900000000 AS DOUBLE) AS energy0_j
    FROM range($gpus) AS t(g)
),
lanes AS (
    SELECT
        *,
        gpu_index // lane_size AS lane,
        'n' || CAST(node_n AS VARCHAR) || '-' || CAST(gpu_index // lane_size AS VARCHAR) || '-'
            AS job_prefix,
        gpu_index % lane_size AS rank,
        3600 * (2 + CAST(hash(node_n, gpu_index // lane_size, $seed) % 11 AS BIGINT)) AS slot_s,
        CAST(hash(node_n, gpu_index // lane_size, $seed + 1) % 40 AS BIGINT) AS held_pct,
        CAST(hash(node_n, gpu_index // lane_size, $seed + 2) % 3600 AS BIGINT) AS phase_s,
        (node_n + $seed + 8) % 16 = 0 AND hash(node_n, day_n, $seed + 12) % 10 < 6 AS hot_node,
        43200 + CAST(hash(node_n, day_n, $seed + 12) % 10800 AS BIGINT) AS hot_from_s,
        2 * 3600 + CAST(hash(node_n, day_n, $seed + 15) % 10800 AS BIGINT) AS hot_s,
        hash(node_n, day_n, $seed + 13) % 40 = 0 AS gap_node,
        CAST(hash(node_n, day_n, $seed + 16) % 82800 AS BIGINT) AS gap_from_s,
        300 + CAST(hash(node_n, day_n, $seed + 17) % 2100 AS BIGINT) AS gap_s
    FROM gpus
),
devices AS (
    SELECT
        *,
        CAST(slot_s * (60 + held_pct) / 100 AS BIGINT) AS alloc_s,
        CASE WHEN a100 THEN 400.0 ELSE 700.0 END AS limit_w,
        CASE WHEN a100 THEN 55.0 ELSE 70.0 END AS idle_w,
        CASE WHEN a100 THEN 81920.0 ELSE 81559.0 END AS fb_total,
        CASE WHEN a100 THEN 1410.0 ELSE 1980.0 END AS clock_max,
        CASE WHEN a100 THEN 210.0 ELSE 345.0 END AS clock_idle,
        CASE WHEN a100 THEN 1593.0 ELSE 2619.0 END AS mem_clock,
        CASE WHEN a100 THEN 185.0 ELSE 315.0 END AS mean_w,
        CASE WHEN a100 THEN 'NVIDIA A100-SXM4-80GB' ELSE 'NVIDIA H100 80GB HBM3' END AS model
    FROM lanes
),
steps AS (
    SELECT
        d.*,
        hash(d.gpu, k, $seed + 3) AS h1,
        hash(d.gpu, k, $seed + 5) AS h2,
        CAST($day_start_e AS BIGINT) * 1000 + k * CAST($interval_s AS BIGINT) * 1000 AS step_ms
    FROM devices AS d, range(CAST(86400 // $interval_s AS BIGINT)) AS s(k)
),
draws AS (
    SELECT
        *,
        step_ms + least(
            greatest(
                scrape_ms + CAST((h1 & 1023) + ((h1 >> 10) & 1023) AS BIGINT) // 2 - 511, 0
            ),
            CAST($interval_s AS BIGINT) * 1000 - 1
        ) AS ts_ms,
        ((h1 >> 20) & 1023) < 3 AS lost,
        CAST((h1 >> 32) & 1048575 AS DOUBLE) / 1048576 AS u,
        sqrt(-2 * ln(CAST((h2 & 1048575) + 1 AS DOUBLE) / 1048577))
        * cos(2 * pi() * CAST((h2 >> 20) & 1048575 AS DOUBLE) / 1048576) AS noise,
        CAST((h2 >> 40) & 1048575 AS DOUBLE) / 1048576 AS r
    FROM steps
),
owned AS (
    SELECT
        *,
        (ts_ms - phase_s * 1000) // (slot_s * 1000) AS slot,
        (ts_ms - phase_s * 1000) % (slot_s * 1000) AS since_ms,
        (ts_ms - phase_s * 1000) % (slot_s * 1000) < alloc_s * 1000 AS allocated,
        (ts_ms // 1000) % 86400 AS tod_s
    FROM draws
    WHERE NOT lost
        AND NOT (gap_node AND (ts_ms // 1000) % 86400 >= gap_from_s
            AND (ts_ms // 1000) % 86400 < gap_from_s + gap_s)
),
jobs AS (
    SELECT
        *,
        CASE WHEN allocated THEN hash(node_n, lane, slot, $seed + 4) END AS hj,
        CASE WHEN allocated THEN job_prefix || CAST(slot AS VARCHAR) END AS job_id
    FROM owned
),
regimes AS (
    SELECT
        *,
        CASE
            WHEN hj IS NULL THEN -1
            WHEN hj % 1000 < 629 THEN 0  -- pretrain
            WHEN hj % 1000 < 721 THEN 3  -- inference
            WHEN hj % 1000 < 801 THEN 1  -- finetune
            WHEN hj % 1000 < 845 THEN 2  -- input_bound
            WHEN hj % 1000 < 888 THEN 7  -- hung
            WHEN hj % 1000 < 926 THEN 6  -- partial
            WHEN hj % 1000 < 952 THEN 4  -- notebook
            WHEN hj % 1000 < 971 THEN 5  -- idle
            WHEN hj % 1000 < 986 THEN 9  -- overallocated
            WHEN hj % 1000 < 998 THEN 8  -- memory_hold
            ELSE 10  -- debug
        END AS code,
        coalesce(CAST((hj >> 10) & 1048575 AS DOUBLE) / 1048576, 0.5) AS level,
        since_ms / 1000.0 AS since_s
    FROM jobs
),
shaped AS (
    SELECT
        *,
        code IN (0, 1, 7, 10) OR (code = 6 AND rank < 1 + ((hj >> 50) & 1)) AS training,
        code = 7 AND since_ms >= alloc_s * (150 + ((hj >> 52) & 1023) * 350 // 1024) AS hung_now,
        CASE
            WHEN code = 0 AND ((hj >> 30) & 1023) < 307
                THEN CASE WHEN rank = (hj >> 40) % lane_size THEN 0.45 ELSE 0.85 END
            ELSE 1.0
        END AS straggle,
        (code = 0 AND since_s % 3600 < 90)
        OR (code IN (0, 1, 2, 7, 10) AND since_s < 60 + 240 * level) AS paused,
        CASE WHEN u < 0.3 THEN 0.5 + 0.5 * r ELSE 0.04 * r END AS input_frac,
        least(
            greatest(
                0.1 + 0.45 * greatest(sin(pi() * (tod_s / 3600.0 - 7) / 14), 0) + 0.04 * noise,
                0.02
            ),
            0.9
        ) AS demand
    FROM regimes
),
trained AS (
    SELECT
        *,
        CASE
            WHEN code = 0 THEN 0.6 + 0.22 * level
            WHEN code = 6 THEN 0.4 + 0.3 * level
            WHEN code = 7 THEN 0.55 + 0.2 * level
            ELSE 0.35 + 0.3 * level
        END AS train_base
    FROM shaped
),
activity AS (
    SELECT
        *,
        CASE
            WHEN hung_now THEN 0.004 * u
            WHEN paused THEN 0.0
            WHEN training THEN least(greatest(train_base + 0.05 * noise, 0.05), 0.97) * straggle
            WHEN code = 2 THEN input_frac * (0.5 + 0.2 * level)
            WHEN code = 3 THEN demand * 0.6
            WHEN code = 4 AND u < 0.07 THEN 0.2 + 0.6 * r
            WHEN code = 9 THEN 0.04 + 0.11 * u
            ELSE 0.0
        END AS sm,
        CASE
            WHEN hung_now THEN 100.0
            WHEN paused THEN 0.0
            WHEN training THEN 96 + 4 * u
            WHEN code = 2 THEN 100 * input_frac
            WHEN code = 3 THEN least(demand * 220, 100)
            WHEN code = 4 AND u < 0.07 THEN 40 + 60 * r
            WHEN code = 9 THEN 15 + 30 * u
            ELSE 0.0
        END AS util,
        CASE
            WHEN hung_now THEN 0.0
            WHEN training
                THEN least(greatest(
                    0.2 + 0.3 * least(greatest(train_base + 0.05 * noise, 0.05), 0.97)
                    + 0.03 * noise, 0), 1)
            WHEN code = 2 THEN input_frac * (0.5 + 0.2 * level) * 0.5
            WHEN code = 3 THEN demand * 0.6 * 0.8
            ELSE 0.0
        END AS dram,
        CASE
            WHEN code = 0 THEN 0.86 + 0.09 * level
            WHEN code = 6 AND training THEN 0.5 + 0.35 * level
            WHEN code = 6 THEN 0.006
            WHEN code = 7 THEN 0.7 + 0.2 * level
            WHEN code IN (1, 10) THEN 0.4 + 0.45 * level
            WHEN code = 2 THEN 0.3 + 0.3 * level
            WHEN code = 3 THEN 0.6 + 0.2 * level
            WHEN code = 4 THEN 0.15 + 0.35 * level
            WHEN code = 5 THEN CASE WHEN level < 0.5 THEN 0.006 ELSE 0.0 END
            WHEN code = 8 THEN 0.7 + 0.25 * level
            WHEN code = 9 THEN 0.04 + 0.06 * level
            ELSE 0.0
        END AS fb_frac,
        CASE
            WHEN code = 0 THEN 0.72
            WHEN code IN (1, 10) THEN 0.55
            WHEN code IN (3, 4) THEN 0.4
            WHEN code = 9 THEN 0.3
            ELSE 0.5
        END AS tensor_ratio,
        CASE
            WHEN hung_now THEN 0.0
            WHEN code = 0
                THEN 4e10 + 8e10 * least(greatest(train_base + 0.05 * noise, 0.05), 0.97)
            WHEN code = 7
                THEN 2e10 + 4e10 * least(greatest(train_base + 0.05 * noise, 0.05), 0.97)
            WHEN code IN (1, 10) AND lane_size > 1 THEN 5e9 + 2.5e10 * u
            ELSE 0.0
        END AS nvlink,
        CASE
            WHEN training THEN 2e8 + 8e8 * u
            WHEN code = 2 THEN 1e9 + 5e9 * u
            WHEN code = 3 THEN 2e8 + 6e8 * u
            ELSE 2e6 + 1.8e7 * r
        END AS pcie,
        hot_node AND tod_s >= hot_from_s AND tod_s < hot_from_s + hot_s AS hot
    FROM trained
),
powered AS (
    SELECT
        *,
        least(
            greatest(
                (
                    CASE
                        WHEN hung_now THEN idle_w + 40
                        ELSE idle_w + (limit_w - idle_w) * (
                            0.08 * CAST(util > 0 AS INTEGER) + 0.8 * pow(sm, 0.9) + 0.1 * dram
                        )
                    END + 3 * noise
                ) * CASE WHEN hot THEN 0.85 ELSE 1.0 END,
                idle_w * 0.9
            ),
            limit_w
        ) AS power,
        least(fb_frac * fb_total + CASE WHEN fb_frac > 0 THEN 0 ELSE 1 END, fb_total - 512)
            AS fb_used
    FROM activity
),
clocked AS (
    SELECT
        *,
        28 + 52 * (power - idle_w) / (limit_w - idle_w) + 1.5 * noise
        + CASE WHEN hot THEN 16 ELSE 0 END AS temp,
        CASE WHEN util > 0 THEN clock_max * (0.97 + 0.03 * u) ELSE clock_idle END
        * CASE WHEN power > 0.97 * limit_w THEN 0.92 ELSE 1.0 END
        * CASE WHEN hot AND util > 0 THEN 0.7 ELSE 1.0 END AS clock
    FROM powered
)
SELECT
    make_timestamptz(ts_ms * 1000) AS ts,
    CAST($cluster AS VARCHAR) AS cluster,
    node,
    gpu_index,
    gpu_uuid,
    model,
    CAST($interval_s AS FLOAT) AS interval_s,
    job_id,
    CAST(round(util) AS FLOAT) AS gpu_util_pct,
    CAST(CASE WHEN NOT no_profiling THEN
        CASE WHEN hung_now THEN sm ELSE least(sm * 1.08 + 0.01 * CAST(util > 0 AS INTEGER), 1) END
    END AS FLOAT) AS engine_active,
    CAST(CASE WHEN NOT no_profiling THEN sm END AS FLOAT) AS sm_active,
    CAST(CASE WHEN NOT no_profiling THEN sm * (0.3 + 0.2 * level) END AS FLOAT) AS sm_occupancy,
    CAST(CASE WHEN NOT no_profiling THEN sm * tensor_ratio END AS FLOAT) AS tensor_active,
    CAST(CASE WHEN NOT no_profiling THEN dram END AS FLOAT) AS dram_active,
    CAST(round(fb_used) AS FLOAT) AS fb_used_mib,
    CAST(fb_total - 512 - round(fb_used) AS FLOAT) AS fb_free_mib,
    CAST(power AS FLOAT) AS power_w,
    energy0_j + (CAST(ts_ms AS DOUBLE) / 1000 - 1.7e9) * mean_w AS energy_j,
    CAST(round(temp) AS FLOAT) AS temp_c,
    CAST(round(temp + 6) AS FLOAT) AS mem_temp_c,
    CAST(round(clock) AS FLOAT) AS sm_clock_mhz,
    CAST(mem_clock AS FLOAT) AS mem_clock_mhz,
    CAST(
        CASE WHEN util > 0 THEN 0 ELSE 1 END
        + CASE WHEN power > 0.97 * limit_w THEN 4 ELSE 0 END
        + CASE WHEN hot AND util > 0 THEN 96 ELSE 0 END AS BIGINT
    ) AS clock_event_reasons,
    CASE WHEN NOT no_profiling THEN round(pcie * 0.3, -6) END AS pcie_tx_bps,
    CASE WHEN NOT no_profiling THEN round(pcie, -6) END AS pcie_rx_bps,
    CASE WHEN NOT no_profiling THEN round(nvlink / 2, -6) END AS nvlink_tx_bps,
    CASE WHEN NOT no_profiling THEN round(nvlink / 2, -6) END AS nvlink_rx_bps,
    CAST(0 AS INTEGER) AS xid_last,
    CAST(0 AS BIGINT) AS ecc_sbe_volatile,
    CAST(0 AS BIGINT) AS ecc_dbe_volatile,
    false AS remap_pending,
    false AS remap_failure,
    job_id AS hpc_job,
    'synthetic' AS source
FROM clocked
