#!/bin/bash
# Slurm Epilog: remove this job from dcgm-exporter's job-mapping files (see the prolog).
# A GPU's file is deleted when no job is left in it. Never fails the job.
set -u
dir="${GPULEDGER_HPC_JOB_MAPPING_DIR:-/var/lib/dcgm-exporter/job-mapping}"
job="${SLURM_JOB_ID:-}"
gpus="${SLURM_JOB_GPUS:-}"
[ -n "$job" ] && [ -n "$gpus" ] && [ -d "$dir" ] || exit 0
exec 9>"$dir/.lock" || exit 0
flock -w 10 9 || { echo "dcgm job mapping: lock timeout in $dir" >&2; exit 0; }
IFS=',' read -ra indices <<< "$gpus"
for idx in "${indices[@]}"; do
    case "$idx" in ''|*[!0-9]*) continue ;; esac
    file="$dir/$idx"
    [ -f "$file" ] || continue
    remaining=$(grep -vxF "$job" "$file" || true)
    if [ -z "$remaining" ]; then
        rm -f "$file"
    else
        printf '%s\n' "$remaining" > "$file.tmp" && chmod 0644 "$file.tmp" && mv "$file.tmp" "$file"
    fi
done
exit 0
