-- job_scope: what a detector's scope is judged by, for every job (app/pipeline/round.py).
--
-- Grain:   one row per (cluster, job_id)
-- Reads:   jobs_latest
-- Params:  none
-- Returns: cluster, job_id, partition, qos, user, account
--
-- A finding about a job is kept or dropped by its job's partition, QOS, user and account
-- ([detect.<detector>] partitions, exclude_partitions, exclude_qos, exclude_users,
-- exclude_accounts).

SELECT
    cluster,
    job_id,
    partition,
    qos,
    user,
    account
FROM jobs_latest
