-- job_co2e_hourly: each job's energy per UTC hour with the carbon intensity it is counted at.
--
-- Grain:   one row per (cluster, job_id, hour) with energy
-- Reads:   job_energy_hourly, carbon_intensity (the configuration's, warehouse/emissions.py)
-- Params:  none
-- Returns: cluster, job_id, date, hour, energy_j, g_per_kwh, fallback
--
-- The intensity of an hour is the cluster's value for that hour (its CSV), else the cluster's
-- constant, else the default for every cluster (the carbon_intensity row with a null cluster);
-- g_per_kwh is null when none applies (the intensity is unknown, never 0). fallback: the
-- cluster has hourly values but not for this hour, so the constant or default stood in.
-- g CO2e = energy_j / 3.6e6 × g_per_kwh.

WITH hourly AS (
    SELECT DISTINCT cluster
    FROM carbon_intensity
    WHERE cluster IS NOT NULL AND hour_start IS NOT NULL
)
SELECT
    e.cluster,
    e.job_id,
    e.date,
    e.hour,
    e.energy_j,
    coalesce(h.g_per_kwh, c.g_per_kwh, d.g_per_kwh) AS g_per_kwh,
    h.g_per_kwh IS NULL AND s.cluster IS NOT NULL AS fallback
FROM job_energy_hourly AS e
LEFT JOIN carbon_intensity AS h
    ON h.cluster = e.cluster AND h.hour_start = e.hour
LEFT JOIN carbon_intensity AS c
    ON c.cluster = e.cluster AND c.hour_start IS NULL
LEFT JOIN carbon_intensity AS d
    ON d.cluster IS NULL AND d.hour_start IS NULL
LEFT JOIN hourly AS s
    ON s.cluster = e.cluster
