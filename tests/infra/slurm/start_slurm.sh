#!/usr/bin/env bash
# Start a single-host Slurm 22.05 test cluster with accounting, for tests/slurm_live:
# munged, MariaDB (127.0.0.1), slurmdbd, slurmctld and two slurmd (gpu-node01: 8 fake h100,
# gpu-node02: 4 fake a100, as GRES on dummy char devices), users alice/bob/carol in the accounts
# research and ml. Idempotent: a daemon that is already running is left alone, so re-running it
# after stopping one daemon (stop_slurm.sh slurmdbd) restarts just that one.
#
# Usage: start_slurm.sh [--fresh]
#   --fresh  stop everything first and start from an empty accounting database and slurmctld
#            state (job ids start again at 1).
# Needs root and the Debian packages slurm-wlm slurmdbd mariadb-server munge (.ci/install-deps.sh).
# Prints `SLURM_CONF=<path>` on success: export it to point sacct, sbatch, scontrol at the cluster.
# State, logs and configs: $GPULEDGER_SLURM_DIR (default /var/tmp/gpuledger-slurm).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

fresh=0
for arg in "$@"; do
    case $arg in
        --fresh) fresh=1 ;;
        *) die "unknown argument $arg (usage: start_slurm.sh [--fresh])" ;;
    esac
done

[ "$(id -u)" -eq 0 ] || die "must run as root (it starts daemons, makes device nodes and users)"
# The daemons run as other users (mysql, slurm): the caller's TMPDIR (`make test` puts the tests'
# scratch files in a private folder on /dev/shm) is not theirs to write, and mariadbd, which
# keeps its temporary files in TMPDIR, would not start. They use the system's.
unset TMPDIR
missing=()
for prog in munged munge mariadbd mariadb mariadb-install-db slurmdbd slurmctld slurmd sacctmgr \
    sacct sbatch scontrol sinfo useradd runuser mknod; do
    command -v "$prog" >/dev/null || missing+=("$prog")
done
[ ${#missing[@]} -eq 0 ] || die "missing programs: ${missing[*]}; install the Debian packages \
slurm-wlm slurmdbd mariadb-server munge (run .ci/install-deps.sh as root)"

if [ $fresh -eq 1 ]; then
    "$HERE/stop_slurm.sh"
    rm -rf "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/jobs" "$DIR/hooks" "$DIR/etc/slurm.conf.extra"
fi

# ---- folders, configs, fake GPUs
install -d -m 0755 "$DIR" "$ETC"
install -d -m 0755 -o slurm -g slurm "$RUN" "$LOG" "$DIR/state" "$DIR/state/slurmctld"
install -d -m 0700 -o munge -g munge "$MUNGE_DIR"
install -d -m 0755 -o mysql -g mysql "$DB_DIR"
install -d -m 1777 "$DIR/jobs" # job scripts and output, written by the job owners
for node in "${NODES[@]}"; do install -d -m 0755 "$DIR/spool/$node" "$DIR/fakegpu/$node"; done
make_gpus() { # node count
    local i dev
    for ((i = 0; i < $2; i++)); do
        dev=$DIR/fakegpu/$1/nvidia$i
        [ -c "$dev" ] || mknod -m 666 "$dev" c 195 "$i" 2>/dev/null || {
            # Without CAP_MKNOD: a plain file works too (slurmd only logs a warning).
            say "mknod not allowed; $dev is a plain file"
            touch "$dev"
        }
    done
}
make_gpus gpu-node01 8
make_gpus gpu-node02 4

render() { # template destination
    sed -e "s|@DIR@|$DIR|g" -e "s|@CLUSTER@|$CLUSTER|g" \
        -e "s|@SLURMCTLD_PORT@|$SLURMCTLD_PORT|g" -e "s|@SLURMD_PORT@|$SLURMD_PORT|g" \
        -e "s|@SLURMDBD_PORT@|$SLURMDBD_PORT|g" -e "s|@MARIADB_PORT@|$MARIADB_PORT|g" \
        -e "s|@NODE1_PORT@|$NODE1_PORT|g" -e "s|@NODE2_PORT@|$NODE2_PORT|g" "$1" >"$2.tmp"
    mv "$2.tmp" "$2"
}
render "$HERE/slurm.conf.in" "$ETC/slurm.conf"
# lines a test adds for a while (tests/slurm_live/test_live_zz_mail.py: MailProg and
# EpilogSlurmctld), read when slurmctld starts
[ -r "$ETC/slurm.conf.extra" ] && cat "$ETC/slurm.conf.extra" >>"$ETC/slurm.conf"
render "$HERE/gres.conf.in" "$ETC/gres.conf"
render "$HERE/slurmdbd.conf.in" "$ETC/slurmdbd.conf"
chmod 0644 "$ETC/slurm.conf" "$ETC/gres.conf"
# MailProg and EpilogSlurmctld: run as SlurmUser, idle until a test writes hooks/gpuledger.env.
install -d -m 0755 "$DIR/hooks"
for hook in mailprog epilog-slurmctld; do
    render "$HERE/hooks/$hook.sh" "$DIR/hooks/$hook"
    chmod 0755 "$DIR/hooks/$hook"
done
chown slurm:slurm "$ETC/slurmdbd.conf" # slurmdbd refuses a config not 600 and SlurmUser's
chmod 0600 "$ETC/slurmdbd.conf"

# ---- munge: reuse a munged that already answers on the standard socket, else start ours
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || die "/etc/munge/munge.key is missing (reinstall munge)"
    install -d -m 0755 -o munge -g munge /run/munge
    if [ -z "$(pid_of munged)" ]; then
        say "starting munged"
        runuser -u munge -- munged --pid-file="$MUNGE_DIR/munged.pid" \
            --log-file="$MUNGE_DIR/munged.log"
    fi
    wait_for 20 "munged" sh -c 'munge -n </dev/null | unmunge' || die "munged did not start"
fi

# ---- MariaDB: our own data folder, 127.0.0.1:$MARIADB_PORT and a socket in $DB_DIR
sql() { mariadb --no-defaults --socket="$DB_SOCK" -u root -N -B -e "$1"; }
if [ -z "$(pid_of mariadbd)" ]; then
    if [ ! -d "$DB_DIR/data/mysql" ]; then
        say "initialising the MariaDB data folder"
        rm -rf "$DB_DIR/data"
        mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DIR/data" \
            --auth-root-authentication-method=socket --skip-test-db >"$DB_DIR/install.log" 2>&1 ||
            die "mariadb-install-db failed, see $DB_DIR/install.log"
    fi
    say "starting mariadbd"
    rm -f "$DB_SOCK"
    nohup mariadbd --no-defaults --user=mysql --datadir="$DB_DIR/data" --socket="$DB_SOCK" \
        --pid-file="$DB_PID" --port="$MARIADB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --log-error="$DB_DIR/mariadbd.log" --innodb-buffer-pool-size=256M \
        --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
fi
wait_for 60 "mariadbd" sql "SELECT 1" || die "mariadbd did not start, see $DB_DIR/mariadbd.log"
if [ $fresh -eq 1 ]; then
    sql "DROP DATABASE IF EXISTS slurm_acct_db"
fi
sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
     CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmdbpass';
     GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

# ---- slurmdbd (before slurmctld: the cluster must be registered first)
if [ -z "$(pid_of slurmdbd)" ]; then
    say "starting slurmdbd"
    /usr/sbin/slurmdbd || die "slurmdbd did not start, see $LOG/slurmdbd.log"
fi
wait_for 60 "slurmdbd" sacctmgr -n show cluster || die "slurmdbd does not answer, see $LOG/slurmdbd.log"

# ---- users (job owners must be real Linux users) and their associations
for user in alice bob carol; do
    id -u "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
done
has() { [ -n "$(sacctmgr -n -P "$@" 2>/dev/null)" ]; }
add() { sacctmgr -i "$@" >/dev/null; }
has show cluster "$CLUSTER" format=cluster || add add cluster "$CLUSTER"
has show account research format=account || add add account research FairShare=60
has show account ml format=account || add add account ml FairShare=40
has show association user=alice account=research format=user ||
    add add user alice Account=research
has show association user=bob account=ml format=user || add add user bob Account=ml
has show association user=carol account=ml format=user ||
    add add user carol Account=ml,research DefaultAccount=ml
has show association user=root account=research format=user ||
    add add user root Account=research

# ---- slurmctld, then one slurmd per fake node
if [ -z "$(pid_of slurmctld)" ]; then
    say "starting slurmctld"
    /usr/sbin/slurmctld || die "slurmctld did not start, see $LOG/slurmctld.log"
fi
wait_for 60 "slurmctld" scontrol ping || die "slurmctld does not answer, see $LOG/slurmctld.log"
for node in "${NODES[@]}"; do
    if [ -z "$(pid_of "slurmd-$node")" ]; then
        say "starting slurmd $node"
        /usr/sbin/slurmd -N "$node" || die "slurmd $node did not start, see $LOG/slurmd-$node.log"
    fi
done

# ---- ready: both nodes up (not down, drained or invalid)
nodes_up() {
    local states
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
    for node in "${NODES[@]}"; do
        grep -Eq "^$node (idle|mix|alloc|comp)\$" <<<"$states" || return 1
    done
}
deadline=$((SECONDS + 60))
until nodes_up; do
    # A node drained earlier (e.g. by a GRES mismatch) stays drained until resumed.
    for node in "${NODES[@]}"; do
        if sinfo -h -N -n "$node" -o '%t' 2>/dev/null | grep -Eq 'drain|drng|inval|down'; then
            scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
        fi
    done
    if [ $SECONDS -ge $deadline ]; then
        sinfo -N -l >&2 || true
        die "the nodes did not come up, see $LOG/slurmctld.log and $LOG/slurmd-*.log"
    fi
    sleep 0.3
done
sacct -n -X -S now >/dev/null || die "sacct does not answer, see $LOG/slurmdbd.log"
say "ready ($CLUSTER: ${NODES[*]})"
echo "SLURM_CONF=$SLURM_CONF"
