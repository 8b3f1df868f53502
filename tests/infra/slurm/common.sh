# Shared by start_slurm.sh and stop_slurm.sh (sourced, not run). Everything the test cluster
# owns lives under $GPULEDGER_SLURM_DIR (default /var/tmp/gpuledger-slurm): configs, pid files,
# logs, slurmctld state, slurmd spools, fake GPU devices, its own MariaDB data and job output.
# Every daemon listens on 127.0.0.1 only, on ports that differ from the services' defaults.

DIR=${GPULEDGER_SLURM_DIR:-/var/tmp/gpuledger-slurm}
CLUSTER=testcluster
NODES=(gpu-node01 gpu-node02)
SLURMCTLD_PORT=${GPULEDGER_SLURMCTLD_PORT:-16817}
SLURMD_PORT=${GPULEDGER_SLURMD_PORT:-16818}
SLURMDBD_PORT=${GPULEDGER_SLURMDBD_PORT:-16819}
NODE1_PORT=${GPULEDGER_SLURMD_NODE1_PORT:-16801}
NODE2_PORT=${GPULEDGER_SLURMD_NODE2_PORT:-16802}
MARIADB_PORT=${GPULEDGER_MARIADB_PORT:-16306}

ETC=$DIR/etc
RUN=$DIR/run
LOG=$DIR/log
MUNGE_DIR=$DIR/munge
DB_DIR=$DIR/mariadb
DB_SOCK=$DB_DIR/mysqld.sock
DB_PID=$DB_DIR/mariadbd.pid
export SLURM_CONF=$ETC/slurm.conf

say() { echo "slurm-test: $*" >&2; }
die() {
    say "ERROR: $*"
    exit 1
}

# pid_of NAME: the pid of a daemon of ours that is alive, from its pid file (empty if none).
# A stale pid file, or one whose pid now belongs to another program, gives nothing.
pid_of() {
    local file comm pid
    case $1 in
        munged) file=$MUNGE_DIR/munged.pid comm=munged ;;
        mariadbd) file=$DB_PID comm=mariadbd ;;
        slurmdbd) file=$RUN/slurmdbd.pid comm=slurmdbd ;;
        slurmctld) file=$RUN/slurmctld.pid comm=slurmctld ;;
        slurmd-*) file=$RUN/$1.pid comm=slurmd ;;
        *) die "unknown daemon $1" ;;
    esac
    [ -s "$file" ] || return 0
    pid=$(tr -dc '0-9' <"$file")
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 0
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] && echo "$pid"
    return 0
}

# wait_for SECONDS DESCRIPTION COMMAND...: retry COMMAND every 0.2 s until it succeeds.
wait_for() {
    local limit=$1 what=$2
    shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            say "timed out after ${limit}s waiting for $what"
            return 1
        fi
        sleep 0.2
    done
}
