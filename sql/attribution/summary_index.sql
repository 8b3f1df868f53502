-- summary_index: what each day partition of the sample-level marts holds, per device and job —
-- the state the summary marts are updated from when only some day partitions change.
--
-- Grain:   one row per (cluster, date, device, job_id); job_id null = unallocated time
-- Reads:   gpu_job_buckets (the day partitions being indexed)
-- Params:  none
-- Returns: cluster, date, device, job_id, first_e, last_end_e, interval_end_e
--
-- min/max over these rows equal min/max over the buckets they stand for, and the devices are
-- the same set: the summary marts read gpu_job_buckets only for the data's start and end and
-- its devices, so this small table stands in for it (warehouse/summary/index.py). The jobs of a day
-- tell which job rows a change of that day can touch, also after the day is gone.

SELECT
    cluster,
    date,
    device,
    job_id,
    min(first_e) AS first_e,
    max(last_end_e) AS last_end_e,
    max(interval_end_e) AS interval_end_e
FROM gpu_job_buckets
GROUP BY cluster, date, device, job_id
