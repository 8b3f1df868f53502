-- sample_devices: the devices the samples come from, numbered, with each set of key values seen.
--
-- Grain:   one row per distinct (cluster, gpu_uuid, node, gpu_index, mig_instance, model) of
--          unowned_samples
-- Reads:   unowned_samples (owners do not change the devices)
-- Params:  none
-- Returns: variant_id, device_id, gpu_id, cluster, device, device_node, device_index, node,
--          gpu_index, gpu_uuid, mig_instance, model
--
-- A device is the UUID, else node and index, and the MIG instance (DESIGN §4): device_id numbers
-- them, gpu_id the physical GPUs their MIG instances share (null where the GPU has no name: no
-- UUID and no index), device the GPU's name (the UUID, else node/index). variant_id numbers each
-- set of values a device's rows carry (its node or model may change while its UUID does not).
-- The per-day pass sorts, partitions and groups the samples by these integers and joins the
-- strings back after (sql/views/sample_steps.sql, sql/views/sample_spans.sql,
-- sql/marts/gpu_job_buckets.sql): what a sort or a hash table carries is smaller.

-- The numbers are 32-bit (DuckDB's are 64): the sort by device and time carries three of them
-- in every sample row, and partitions by one (a third less time in that window on a day of
-- 2.9 M samples).
SELECT
    -- ordered: Spark numbers rows only in an ordered window
    CAST(row_number() OVER (
        ORDER BY cluster, gpu_uuid, device_node, device_index, mig_instance, node, gpu_index, model
    ) AS INTEGER) AS variant_id,
    CAST(dense_rank() OVER (
        ORDER BY cluster, gpu_uuid, device_node, device_index, mig_instance
    ) AS INTEGER) AS device_id,
    CASE
        WHEN device IS NOT NULL THEN CAST(dense_rank() OVER (ORDER BY cluster, device) AS INTEGER)
    END AS gpu_id,
    cluster,
    device,
    device_node,
    device_index,
    node,
    gpu_index,
    gpu_uuid,
    mig_instance,
    model
-- The distinct key values first (a few hundred rows), the device's name built from them after:
-- built per sample before the DISTINCT, it cost a third of this query.
FROM (
    SELECT
        cluster,
        coalesce(gpu_uuid, node || '/' || CAST(gpu_index AS VARCHAR)) AS device,
        CASE WHEN gpu_uuid IS NULL THEN node END AS device_node,
        CASE WHEN gpu_uuid IS NULL THEN gpu_index END AS device_index,
        node,
        gpu_index,
        gpu_uuid,
        mig_instance,
        model
    FROM (
        SELECT DISTINCT cluster, node, gpu_index, gpu_uuid, mig_instance, model
        FROM unowned_samples
    ) AS seen
) AS keys
