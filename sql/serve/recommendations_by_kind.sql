-- recommendations_by_kind: current recommendations per cluster and kind, with their gain.
--
-- Grain:   one row per (cluster, kind)
-- Reads:   recommendations_latest
-- Params:  none
-- Returns: cluster, kind, recommendations, expected_gain_gpu_h
--
-- The newest version of each recommendation (recommendations_latest). expected_gain_gpu_h
-- sums the gains that are GPU-hours saved (gain_kind 'saved'), the figure an operator can add up;
-- 0 where a kind has none.

SELECT
    cluster,
    kind,
    count(*) AS recommendations,
    coalesce(sum(expected_gain_gpu_h) FILTER (WHERE gain_kind = 'saved'), 0) AS expected_gain_gpu_h
FROM recommendations_latest
GROUP BY cluster, kind
ORDER BY cluster, kind
