#!/usr/bin/env bash
# Stop the test cluster that start_slurm.sh started, each daemon by the pid in its pid file.
#
# Usage: stop_slurm.sh [DAEMON...]
#   no argument: cancel every job, stop all daemons (slurmd, slurmctld, slurmdbd, mariadbd, and
#                munged if start_slurm.sh started it) and any job or step process they left.
#   DAEMON:      stop just these (slurmctld, slurmdbd, slurmd, mariadbd, munged): for fault tests.
# Idempotent: a daemon that is not running is skipped. Data, logs and configs stay in
# $GPULEDGER_SLURM_DIR (start_slurm.sh --fresh clears them).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root"

# stop NAME...: SIGTERM to each (together), wait up to 20 s for all, then SIGKILL the rest.
stop() {
    local name pid pids=()
    for name in "$@"; do
        pid=$(pid_of "$name")
        [ -n "$pid" ] || continue
        say "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    done
    local deadline=$((SECONDS + 20))
    for pid in "${pids[@]}"; do
        while [ -d "/proc/$pid" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        if [ -d "/proc/$pid" ]; then
            say "pid $pid ignored SIGTERM; killing it"
            kill -KILL "$pid" 2>/dev/null || true
            while [ -d "/proc/$pid" ]; do sleep 0.1; done
        fi
    done
}

# Processes of this cluster's jobs: slurmstepd and job processes carry our SLURM_CONF and a job
# id in their environment (this script and its callers have no SLURM_JOB_ID).
job_pids() {
    local env_file pid environ
    for env_file in /proc/[0-9]*/environ; do
        pid=${env_file#/proc/}
        pid=${pid%/environ}
        [ "$pid" != $$ ] || continue
        environ=$({ tr '\0' '\n' <"$env_file"; } 2>/dev/null) || continue
        if grep -qx "SLURM_CONF=$SLURM_CONF" <<<"$environ" &&
            { [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmstepd ] ||
                grep -q '^SLURM_JOB_ID=' <<<"$environ"; }; then
            echo "$pid"
        fi
    done
}

daemon_names() {
    local node
    for name in "$@"; do
        case $name in
            slurmd) for node in "${NODES[@]}"; do echo "slurmd-$node"; done ;;
            slurmctld | slurmdbd | mariadbd | munged) echo "$name" ;;
            *) die "unknown daemon $name (slurmctld, slurmdbd, slurmd, mariadbd, munged)" ;;
        esac
    done
}

if [ $# -gt 0 ]; then
    # shellcheck disable=SC2046  # one word per daemon
    stop $(daemon_names "$@")
    exit 0
fi

# Everything: cancel the jobs first so that no job outlives its slurmd.
if [ -n "$(pid_of slurmctld)" ] && scontrol ping >/dev/null 2>&1; then
    if [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
        say "cancelling the remaining jobs"
        scancel --quiet --full $(squeue -h -o %i) 2>/dev/null || true
        deadline=$((SECONDS + 20))
        while [ -n "$(squeue -h -o %i 2>/dev/null)" ] &&
            [ $SECONDS -lt $deadline ]; do sleep 0.3; done
    fi
fi
# In dependency order; the daemons of one step stop together.
# shellcheck disable=SC2046
stop $(daemon_names slurmd slurmctld)
stop slurmdbd
stop mariadbd munged
leftover=$(job_pids)
if [ -n "$leftover" ]; then
    say "killing job processes left behind: $(echo $leftover)"
    kill -KILL $leftover 2>/dev/null || true
fi
exit 0
