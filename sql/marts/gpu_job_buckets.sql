-- gpu_job_buckets: what each GPU (or MIG instance) did for each job (or for no job) per time bucket.
--
-- Grain:   one row per (cluster, device, mig_instance, job_id, bucket); job_id null = unallocated
-- Reads:   sample_spans, sample_devices (the key columns of the rows' variant_id)
-- Params:
--   $bucket_s    bucket width in seconds; must divide a day (e.g. 300)
--   $idle_below  a sample is idle when busy < this (0-1; DESIGN §4 default 0.01)
-- Returns: cluster, device, mig_instance, job_id, bucket, date, node, gpu_index, gpu_uuid, model,
--          samples, share, first_e, last_end_e, interval_end_e, gap_s, observed_s, carry_s,
--          carry_share, carry_busy, carry_sharers, observed_share_s, active_share_s, idle_share_s, active_s,
--          carry_active_s, idle_s, carry_idle_s, effective_s, busy_known_s, util_sum, util_known_s, sm_sum,
--          sm_known_s, tensor_sum, tensor_known_s, dram_sum, dram_known_s,
--          fb_used_mib_max, energy_j, power_sum, power_known_s, nvlink_bytes, pcie_bytes,
--          shared_s
--
-- The one pass over samples every other mart starts from. A sample counts in the bucket of its
-- ts; carry_* hold the part of its span that runs past the bucket's end, so occupancy can move
-- it to the next bucket and stay exact. The *_sum columns are time-weighted (value × span_s);
-- divide by the matching *_known_s for a mean, so rows add up exactly. The *_share_s columns
-- weight each sample's span by its share of the physical GPU (MIG instances), so occupancy
-- counts a GPU once even when its instances report unevenly. On a shared GPU (several job_ids
-- at one ts) each sharer's spans are its 1/sharers part of the time (sample_spans), shared_s
-- is that part of observed_s, and the carry_* are the GPU's time past the bucket's end, of
-- which the crossing sample holds carry_share.
-- As DESIGN §4 defines it, a sample is active when it is observed and not idle, so a sample
-- with no utilisation field at all counts as active (active_s + idle_s = observed_s).

-- Per sample, what several aggregates share, computed once: the bucket, its end, the part of
-- the span past that end, whether the sample is active or idle, its span weighted by its share.
WITH spans AS (
    SELECT
        *,
        epoch(ts) AS ts_e,
        floor(epoch(ts) / $bucket_s) AS bucket_no,
        (floor(epoch(ts) / $bucket_s) + 1) * $bucket_s AS bucket_end_e,
        greatest(end_e - (floor(epoch(ts) / $bucket_s) + 1) * $bucket_s, 0) AS carry_s,
        busy IS NULL OR busy >= $idle_below AS active,
        busy < $idle_below AS idle,
        span_s * share AS share_s
    FROM sample_spans
),
-- Grouped by the device's number, not its key's columns (strings): what the engine hashes and
-- carries is smaller. The key's values are joined back to the (far fewer) rows after.
buckets AS (
    SELECT
        s.device_id,
        s.job_id,
        s.bucket_no,
        -- the key values of one of the group's rows (a device's node or model may change)
        any_value(s.variant_id) AS variant_id,
        count(*) AS samples,
        avg(s.share) AS share,
        min(s.ts_e) AS first_e,
        max(s.end_e) AS last_end_e,
        max(s.ts_e + s.interval_s) AS interval_end_e,
        sum(s.gap_s) AS gap_s,
        sum(s.span_s) AS observed_s,
        sum(s.carry_s) AS carry_s,
        -- the part of the GPU the one sample that runs past the bucket's end holds (0 when none)
        coalesce(max(CASE WHEN s.end_e > s.bucket_end_e THEN s.share / s.sharers END), 0)
            AS carry_share,
        -- that sample's busy fraction and sharers (null when none): job_gpu_daily counts the
        -- part of it past midnight on the next day
        max(CASE WHEN s.end_e > s.bucket_end_e THEN s.busy END) AS carry_busy,
        max(CASE WHEN s.end_e > s.bucket_end_e THEN s.sharers END) AS carry_sharers,
        sum(s.share_s) AS observed_share_s,
        coalesce(sum(CASE WHEN s.active THEN s.share_s END), 0) AS active_share_s,
        coalesce(sum(CASE WHEN s.idle THEN s.share_s END), 0) AS idle_share_s,
        coalesce(sum(CASE WHEN s.active THEN s.span_s END), 0) AS active_s,
        coalesce(sum(CASE WHEN s.active THEN s.carry_s END), 0) AS carry_active_s,
        coalesce(sum(CASE WHEN s.idle THEN s.span_s END), 0) AS idle_s,
        coalesce(sum(CASE WHEN s.idle THEN s.carry_s END), 0) AS carry_idle_s,
        coalesce(sum(s.busy * s.span_s), 0) AS effective_s,
        coalesce(sum(CASE WHEN s.busy IS NOT NULL THEN s.span_s END), 0) AS busy_known_s,
        sum(s.gpu_util_pct * s.span_s) AS util_sum,
        coalesce(sum(CASE WHEN s.gpu_util_pct IS NOT NULL THEN s.span_s END), 0) AS util_known_s,
        sum(s.sm_active * s.span_s) AS sm_sum,
        coalesce(sum(CASE WHEN s.sm_active IS NOT NULL THEN s.span_s END), 0) AS sm_known_s,
        sum(s.tensor_active * s.span_s) AS tensor_sum,
        coalesce(sum(CASE WHEN s.tensor_active IS NOT NULL THEN s.span_s END), 0)
            AS tensor_known_s,
        sum(s.dram_active * s.span_s) AS dram_sum,
        coalesce(sum(CASE WHEN s.dram_active IS NOT NULL THEN s.span_s END), 0) AS dram_known_s,
        max(s.fb_used_mib) AS fb_used_mib_max,
        sum(s.energy_step_j) AS energy_j,
        sum(s.power_w * s.span_s) AS power_sum,
        coalesce(sum(CASE WHEN s.power_w IS NOT NULL THEN s.span_s END), 0) AS power_known_s,
        sum(s.nvlink_bps * s.span_s) AS nvlink_bytes,
        sum(s.pcie_bps * s.span_s) AS pcie_bytes,
        coalesce(sum(CASE WHEN s.sharers > 1 THEN s.span_s END), 0) AS shared_s
    FROM spans AS s
    GROUP BY s.device_id, s.job_id, s.bucket_no
)
SELECT
    -- one value per device_id: it numbers the (cluster, device, mig_instance) keys
    d.cluster,
    d.device,
    d.mig_instance,
    b.job_id,
    to_timestamp(b.bucket_no * $bucket_s) AS bucket,
    -- the day of every sample in the bucket ($bucket_s divides a day): taken once per bucket,
    -- not cast from each sample's time (that cast cost a sixth of this query)
    CAST(to_timestamp(b.bucket_no * $bucket_s) AS DATE) AS date,
    d.node,
    d.gpu_index,
    d.gpu_uuid,
    d.model,
    b.samples,
    b.share,
    b.first_e,
    b.last_end_e,
    b.interval_end_e,
    b.gap_s,
    b.observed_s,
    b.carry_s,
    b.carry_share,
    b.carry_busy,
    b.carry_sharers,
    b.observed_share_s,
    b.active_share_s,
    b.idle_share_s,
    b.active_s,
    b.carry_active_s,
    b.idle_s,
    b.carry_idle_s,
    b.effective_s,
    b.busy_known_s,
    b.util_sum,
    b.util_known_s,
    b.sm_sum,
    b.sm_known_s,
    b.tensor_sum,
    b.tensor_known_s,
    b.dram_sum,
    b.dram_known_s,
    b.fb_used_mib_max,
    b.energy_j,
    b.power_sum,
    b.power_known_s,
    b.nvlink_bytes,
    b.pcie_bytes,
    b.shared_s
FROM buckets AS b
INNER JOIN sample_devices AS d
    ON d.variant_id = b.variant_id
