#!/bin/bash
# Slurm Prolog: tell dcgm-exporter which job holds which GPU on this node.
#
# dcgm-exporter started with --hpc-job-mapping-dir DIR (or DCGM_HPC_JOB_MAPPING_DIR) reads one
# file per GPU, named by the DCGM GPU id (the NVML index), holding one job id per line, and adds
# hpc_job="<id>" to that GPU's series; gpuledger's Prometheus and dcgm-exporter collectors turn
# those labels into job_gpus rows (mapping exporter-label).
#
# Install (slurm.conf):  Prolog=/etc/slurm/prolog-dcgm-job-mapping.sh
#                        Epilog=/etc/slurm/epilog-dcgm-job-mapping.sh
# Configure the folder with GPULEDGER_HPC_JOB_MAPPING_DIR (default /var/lib/dcgm-exporter/job-mapping).
# Uses SLURM_JOB_GPUS (numeric indices; CUDA_VISIBLE_DEVICES may hold UUIDs on newer Slurm).
# Never fails the job: a mapping problem is logged to stderr and the prolog exits 0.
set -u
dir="${GPULEDGER_HPC_JOB_MAPPING_DIR:-/var/lib/dcgm-exporter/job-mapping}"
job="${SLURM_JOB_ID:-}"
gpus="${SLURM_JOB_GPUS:-}"
[ -n "$job" ] && [ -n "$gpus" ] || exit 0
mkdir -p "$dir" 2>/dev/null && chmod 0755 "$dir" 2>/dev/null
exec 9>"$dir/.lock" || { echo "dcgm job mapping: cannot lock $dir" >&2; exit 0; }
flock -w 10 9 || { echo "dcgm job mapping: lock timeout in $dir" >&2; exit 0; }
IFS=',' read -ra indices <<< "$gpus"
for idx in "${indices[@]}"; do
    case "$idx" in ''|*[!0-9]*) echo "dcgm job mapping: skipping GPU index '$idx'" >&2; continue ;; esac
    file="$dir/$idx"
    if ! grep -qxF "$job" "$file" 2>/dev/null; then
        printf '%s\n' "$job" >> "$file"
        chmod 0644 "$file"
    fi
done
exit 0
