#!/bin/bash
# Slurm EpilogSlurmctld: store the job's gpuledger summary in its AdminComment, so that
# `sacct -o AdminComment` (and `gpuledger job`, once collected) have it after the lake forgets.
# slurm.conf:  EpilogSlurmctld=/usr/local/sbin/epilog-slurmctld-gpuledger.sh
# Runs as SlurmUser (an administrator of the accounting database) when a job ends. The summary
# is `gpuledger job ID --format summary`: one JSON line with busy, idle GPU-h and the main finding,
# as far as the lake knows the job at its end; a job the lake does not have yet gets a summary
# with nulls and a note. It is stored with `sacctmgr modify job` (scontrol refuses a finished
# job); sacctmgr writes the JSON's double quotes as backticks (and Slurm 22.05 lowercases it),
# which `gpuledger` reads back. Never fails the job: errors go to the system log.
set -u
export PATH="${PATH:+$PATH:}/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
config="${GPULEDGER_CONFIG:-/etc/gpuledger/gpuledger.toml}"
[ -e "$config" ] && export GPULEDGER_CONFIG="$config"
export HOME="${HOME:-/tmp}"
gpuledger="${GPULEDGER:-gpuledger}"
tries="${GPULEDGER_EPILOG_TRIES:-10}" # slurmdbd may not have the job yet: retry,
pause="${GPULEDGER_EPILOG_PAUSE_S:-1}" # 1 s apart
job="${SLURM_JOB_ID:-}"
[ -n "$job" ] || exit 0
if [ -n "${SLURM_ARRAY_JOB_ID:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
    job="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" # the id the lake and sacct show
fi
log() { logger -t gpuledger-epilog "job $job: $*" 2>/dev/null || echo "gpuledger-epilog: job $job: $*" >&2; }

# the job of this cluster (another cluster in the lake may have a job of the same id), and of
# this name (the lake may not have collected it yet, and hold an older job of that id)
if ! summary=$("$gpuledger" job "$job" --slurm-cluster "${SLURM_CLUSTER_NAME:-}" \
    --job-name "${SLURM_JOB_NAME:-}" --format summary 2>/tmp/gpuledger-epilog.$$); then
    log "no summary: $(tr '\n' ' ' </tmp/gpuledger-epilog.$$ | cut -c1-300)"
    summary='{"gpuledger":1,"busy":null,"idle_gpu_h":null,"diagnosis":null,"finding":null,"note":"not in the lake at the end"}'
fi
rm -f /tmp/gpuledger-epilog.$$
for ((i = 1; i <= tries; i++)); do
    out=$(sacctmgr -i modify job where jobid="$job" set AdminComment="$summary" 2>&1) &&
        ! grep -qi 'nothing modified' <<<"$out" && exit 0
    sleep "$pause"
done
log "AdminComment not stored: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
exit 0
