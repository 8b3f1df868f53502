-- het_components: the components of a Slurm heterogeneous job, by the job's own id.
--
-- Grain:   one row per component (cluster, job_id) whose id is `$job_id+N`
-- Reads:   jobs_latest
-- Params:
--   $job_id   the heterogeneous job's id (Slurm's `%u` in a job-end mail's subject: 1014)
--   $cluster  the cluster, or NULL for any
-- Returns: cluster, job_id (its components' ids: 1014+0, 1014+1, in offset order)
--
-- The lake keeps a heterogeneous job as its components (sacct's JobID 1014+0, 1014+1), each a
-- job of its own; Slurm names the whole job by the leader's number alone. The offset after `+`
-- is digits only (another id that merely starts alike is none of them).

SELECT
    cluster,
    job_id
FROM jobs_latest
WHERE ($cluster IS NULL OR cluster = $cluster)
    AND starts_with(job_id, $job_id || '+')
    AND regexp_full_match(substr(job_id, length($job_id) + 2), '[0-9]+')
ORDER BY cluster, CAST(substr(job_id, length($job_id) + 2) AS BIGINT)
