-- fairness_weeks: the fairness_weekly rows of one cluster over a range of weeks (the report's
-- week and the ones before it, for week-over-week and 4-week trends).
--
-- Grain:   one row per (week, level, account, user)
-- Reads:   fairness_weekly
-- Params:
--   $cluster     cluster name
--   $first_week  Monday (DATE) of the earliest week wanted
--   $last_week   Monday (DATE) of the report's week
-- Returns: every column of fairness_weekly

SELECT
    cluster,
    week,
    level,
    account,
    user,
    jobs,
    jobs_started,
    alloc_gpu_h,
    observed_gpu_h,
    effective_gpu_h,
    idle_gpu_h,
    energy_kwh,
    cpu_h,
    mem_gib_h,
    usage_share,
    effective_share,
    level_share,
    entitled_share,
    usage_ratio,
    wait_p50_s,
    wait_p95_s,
    low_eff_gpu_h,
    failed_gpu_h,
    unused_limit_gpu_h,
    waste_gpu_h,
    kg_co2e
FROM fairness_weekly
WHERE cluster = $cluster
    AND week >= $first_week
    AND week <= $last_week
ORDER BY week, level, account, user
