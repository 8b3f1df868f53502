-- job_energy_hourly: the energy each job drew per UTC hour, summed over its GPUs.
--
-- Grain:   one row per (cluster, job_id, hour) with energy data
-- Reads:   gpu_job_buckets
-- Params:  none
-- Returns: cluster, job_id, hour, date, energy_j
--
-- A bucket's energy counts in the hour its bucket starts in (exact when the bucket width
-- divides an hour, as the default 300 s does). Hours without power or energy readings have no
-- row: their energy is unknown, not 0. The hours of a job add up to job_usage.energy_kwh.
-- Carbon intensity is applied to these rows by sql/views/job_co2e_hourly.sql.

SELECT
    cluster,
    job_id,
    to_timestamp(floor(epoch(bucket) / 3600) * 3600) AS hour,
    any_value(date) AS date,
    sum(energy_j) AS energy_j
FROM gpu_job_buckets
WHERE job_id IS NOT NULL AND energy_j IS NOT NULL
GROUP BY cluster, job_id, hour
