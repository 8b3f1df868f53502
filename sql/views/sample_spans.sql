-- sample_spans: every GPU sample with the span of time it stands for, its busy fraction and energy.
--
-- Grain:   one row per sample_steps row (one per owned_samples row)
-- Reads:   sample_steps (the samples with their owners in each device's time order, three
--          times: the rows alone at their ts, the rows sharing one, the MIG instances at a ts),
--          sample_devices (the key columns of each row's variant_id, joined back last)
-- Params:  none
-- Returns: cluster, device_id, variant_id (sample_devices' numbers of the device and of its key
--          values), device, device_node, device_index, node, gpu_index, gpu_uuid, mig_instance,
--          model, ts, job_id, interval_s,
--          date, span_s, end_e, gap_s, share, sharers, busy, gpu_util_pct, sm_active,
--          tensor_active, dram_active, fb_used_mib, power_w, energy_step_j, nvlink_bps, pcie_bps
--
-- DESIGN §4: a sample stands for the time until the device's next sample time when that comes
-- within 2 × interval_s; otherwise for interval_s, and the rest of the gap is unobserved
-- (gap_s); never past its owner's allocation end (owner_end_e): the time after it is
-- unobserved too (a job is never observed for longer than it held the GPU). end_e is where
-- the sample's time ends. So per device, sum(span_s + gap_s) = the last sample's ts +
-- interval_s - the first sample's ts exactly, and a duplicated sample (same device, ts and job_id) stands
-- for 0 s. A shared GPU (MPS, time-slicing) reports one row per sharer at the same ts: the
-- `sharers` distinct job_ids there (no job counts as one) each get 1/sharers of the time
-- (span_s, gap_s) and of the energy, so the GPU is counted once. Power is a rate, weighted
-- by that time where it is summed (gpu_job_buckets' power_sum): a sharer's mean power is the
-- GPU's draw while it shared it (its energy over its GPU-hours); split again, it was 1/sharers
-- of that (two jobs on a 400 W GPU read "200 W per GPU", 0.2 kWh over 0.5 GPU-hours).
-- `share` splits device-level fields among the MIG instances reporting at the same ts, so they
-- are counted once per physical GPU too. energy_step_j is the counter's increase over the span;
-- where the counter reset, rose more than a GPU can draw (2 kW over the step: a bad reading), is
-- missing, or the span ends in a gap, power × span is used instead.

-- `steps` names sample_steps once, inlined where read (NOT MATERIALIZED: the plan is that of
-- reading sample_steps three times): the engine binds the view's whole chain once, not thrice.
WITH steps AS NOT MATERIALIZED (
    SELECT * FROM sample_steps
),
-- The MIG instances of each physical GPU (gpu_id; none for a GPU without a name) at each ts.
mig_counts AS (
    SELECT
        gpu_id,
        ts,
        count(DISTINCT mig_instance) AS instances
    FROM steps
    WHERE mig_instance IS NOT NULL AND gpu_id IS NOT NULL
    GROUP BY gpu_id, ts
),
-- Nearly every row is alone at its (device, ts): the next row is the device's next sample.
alone AS (
    SELECT
        *,
        lead_ts AS next_ts,
        lead_energy_j AS next_energy_j,
        1 AS sharers,
        FALSE AS duplicate
    FROM steps
    WHERE NOT tied
),
-- Several rows at one (device, ts): one per sharer, and exact duplicates (same job_id). Only
-- the last of them in the device's order has the next sample time after it.
together AS (
    SELECT
        *,
        nullif(max(lead_ts) OVER device_point, ts) AS next_ts,
        max(CASE WHEN lead_ts > ts THEN lead_energy_j END) OVER device_point AS next_energy_j,
        count(DISTINCT coalesce(job_id, '')) OVER device_point AS sharers,
        -- the rows of one job_id but one are duplicates: they stand for 0 s. Which one stands
        -- is decided by the values, so two sources disagreeing give the same answer every run.
        row_number() OVER (
            PARTITION BY device_id, ts, job_id
            ORDER BY
                energy_j NULLS LAST, power_w NULLS LAST, busy NULLS LAST,
                gpu_util_pct NULLS LAST, fb_used_mib NULLS LAST, interval_s NULLS LAST
        ) > 1 AS duplicate
    FROM steps
    WHERE tied
    WINDOW device_point AS (PARTITION BY device_id, ts)
),
ordered AS (
    SELECT * FROM alone
    UNION ALL
    SELECT * FROM together
),
spans AS (
    SELECT
        o.*,
        CASE WHEN o.mig_instance IS NULL THEN 1.0 ELSE 1.0 / m.instances END AS share,
        -- this row's part of the device's time: 1/sharers, none for a duplicate
        CASE WHEN o.duplicate THEN 0.0 ELSE 1.0 / o.sharers END AS part,
        epoch(o.next_ts) - epoch(o.ts) AS step_s,
        o.next_ts IS NOT NULL AND epoch(o.next_ts) - epoch(o.ts) <= 2 * o.interval_s AS continuous
    FROM ordered AS o
    LEFT JOIN mig_counts AS m
        ON o.mig_instance IS NOT NULL
        AND m.gpu_id = o.gpu_id
        AND m.ts = o.ts
),
-- The time each row stands for: to the device's next sample, or its interval (`raw_s`) ...
stood AS (
    SELECT
        *,
        CASE WHEN continuous THEN step_s ELSE CAST(interval_s AS DOUBLE) END AS raw_s
    FROM spans
),
-- ... and the part of it inside its owner's allocation (`held_s`); the rest is unobserved.
held AS (
    SELECT
        *,
        -- (least and greatest skip a null: a row with no span keeps none)
        CASE
            WHEN owner_end_e IS NULL OR raw_s IS NULL THEN raw_s
            ELSE least(raw_s, greatest(owner_end_e - epoch(ts), 0))
        END AS held_s
    FROM stood
)
SELECT
    d.cluster,
    s.device_id,
    s.variant_id,
    d.device,
    d.device_node,
    d.device_index,
    d.node,
    d.gpu_index,
    d.gpu_uuid,
    s.mig_instance,
    d.model,
    ts,
    job_id,
    interval_s,
    CAST(ts AS DATE) AS date,
    part * held_s AS span_s,
    epoch(ts) + CASE WHEN duplicate THEN 0.0 ELSE held_s END AS end_e,
    part * (
        raw_s - held_s
        + CASE WHEN next_ts IS NOT NULL AND NOT continuous THEN step_s - interval_s ELSE 0.0 END
    ) AS gap_s,
    share,
    sharers,
    busy,
    gpu_util_pct,
    sm_active,
    tensor_active,
    dram_active,
    fb_used_mib,
    power_w * share AS power_w,
    -- (the counter's increase over the part of the step the owner held; an increase no GPU can
    -- draw, above 2 kW over the step, is a bad reading, not energy: one counter 1e9 J high
    -- for one sample made a 1-GPU hour 278 kWh. Such a step, like a reset, is power × time)
    share * part * CASE
        WHEN continuous AND next_energy_j >= energy_j AND held_s = step_s
            AND next_energy_j - energy_j <= 2000.0 * step_s
            THEN next_energy_j - energy_j
        WHEN continuous AND next_energy_j >= energy_j
            AND next_energy_j - energy_j <= 2000.0 * step_s
            THEN (next_energy_j - energy_j) * held_s / step_s
        ELSE power_w * held_s
    END AS energy_step_j,
    nvlink_bps,
    pcie_bps
FROM held AS s
INNER JOIN sample_devices AS d
    ON d.variant_id = s.variant_id
