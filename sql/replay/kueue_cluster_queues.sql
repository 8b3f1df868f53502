-- kueue_cluster_queues: the latest version of each Kueue ClusterQueue's GPU quota rows of one
-- cluster (`gpuledger collect kubernetes`), the quota a Kueue replay admits under.
--
-- Grain:   one row per (ClusterQueue, flavor, resource) whose latest version is not deleted
-- Reads:   queues
-- Params:
--   $cluster  the cluster
-- Returns: name, cohort, flavor, resource, nominal_quota, borrowing_limit, lending_limit,
--          weight, queueing_strategy, within_cluster_queue, reclaim_within_cohort,
--          updated_ts
--
-- A ClusterQueue with no GPU quota has one row with flavor and resource null. Quantities are
-- in units of the resource (GPUs, or MIG instances); null limits are not set. The queueing
-- strategy and preemption policies are null where the collector did not record them.

SELECT
    name,
    parent AS cohort,
    flavor,
    resource,
    gpu_quota AS nominal_quota,
    gpu_borrowing_limit AS borrowing_limit,
    gpu_lending_limit AS lending_limit,
    weight,
    queueing_strategy,
    preemption_within_cluster_queue AS within_cluster_queue,
    preemption_reclaim_within_cohort AS reclaim_within_cohort,
    updated_ts
FROM queues
WHERE cluster = $cluster
    AND kind = 'kueue-clusterqueue'
QUALIFY row_number() OVER (
    PARTITION BY name, coalesce(flavor, ''), coalesce(resource, '')
    ORDER BY updated_ts DESC
) = 1
    AND NOT coalesce(deleted, false)
ORDER BY name, flavor, resource
