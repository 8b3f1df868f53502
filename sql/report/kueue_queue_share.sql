-- kueue_queue_share: each Kueue ClusterQueue's GPU usage in a week against its nominal quota's
-- share of all ClusterQueues' quota (its entitlement on a Kubernetes cluster).
--
-- Grain:   one row per ClusterQueue
-- Reads:   queues, job_usage
-- Params:
--   $cluster       cluster name
--   $week_start_e  start of the week (epoch seconds)
--   $week_end_e    end of the week (exclusive)
-- Returns: queue, gpu_quota, quota_share, weight, alloc_gpu_h, usage_share, usage_ratio
--
-- Jobs belong to the ClusterQueue named in their partition (the Kubernetes collector's rule).
-- A job counts for the week it started in (its whole allocation).

WITH latest AS (
    SELECT
        name,
        flavor,
        resource,
        gpu_quota,
        weight,
        deleted
    FROM queues
    WHERE cluster = $cluster
        AND kind = 'kueue-clusterqueue'  -- the collector's kind (collector.sources.kubernetes.queues)
    QUALIFY row_number() OVER (
        PARTITION BY name, coalesce(flavor, ''), coalesce(resource, '')
        ORDER BY updated_ts DESC
    ) = 1
),
quota AS (
    SELECT
        name AS queue,
        sum(coalesce(gpu_quota, 0)) AS gpu_quota,
        max(weight) AS weight
    FROM latest
    WHERE NOT coalesce(deleted, FALSE)
    GROUP BY name
),
used AS (
    SELECT
        partition AS queue,
        sum(alloc_gpu_h) AS alloc_gpu_h
    FROM job_usage
    WHERE cluster = $cluster
        AND epoch(start_ts) >= $week_start_e
        AND epoch(start_ts) < $week_end_e
    GROUP BY partition
)
SELECT
    q.queue,
    q.gpu_quota,
    q.gpu_quota / nullif(sum(q.gpu_quota) OVER (), 0) AS quota_share,
    q.weight,
    coalesce(u.alloc_gpu_h, 0) AS alloc_gpu_h,
    coalesce(u.alloc_gpu_h, 0) / nullif(sum(coalesce(u.alloc_gpu_h, 0)) OVER (), 0) AS usage_share,
    (coalesce(u.alloc_gpu_h, 0) / nullif(sum(coalesce(u.alloc_gpu_h, 0)) OVER (), 0))
        / nullif(q.gpu_quota / nullif(sum(q.gpu_quota) OVER (), 0), 0) AS usage_ratio
FROM quota AS q
LEFT JOIN used AS u
    ON u.queue = q.queue
ORDER BY q.queue
