#!/usr/bin/env bash
# Check `gpuledger collect nvml` on a real NVIDIA GPU (written for one H200) under a PyTorch load.
#
#   bash scripts/device/nvml_check.sh            # from the repository root; about 1-2 minutes
#
# What it does, writing everything under $OUT (a temporary folder when $OUT is not set):
#   1. checks the prerequisites: nvidia-smi, PyTorch with CUDA, and for the agent pyarrow,
#      click and nvidia-ml-py (pynvml). With no network on the GPU machine, bring wheels:
#        pip download --only-binary=:all: --python-version 3.X nvidia-ml-py pyarrow click -d W
#      and run with WHEELS=W: they are installed into a venv that still sees the system torch;
#   2. runs the agent once with the GPU idle (the baseline);
#   3. starts nvml_torch_load.py (bf16 matmuls + an 8 GiB allocation) in a fake Slurm job
#      cgroup `…slurmstepd.scope/job_1234/step_0/user/task_0` (cgroup v2) or
#      `/slurm/uid_0/job_1234/step_0/task_0` (v1) when /sys/fs/cgroup can be written (root),
#      else as a plain process whose PID is checked instead;
#   4. runs `collect nvml --once --show-processes` three times under load and once after it;
#   5. checks: utilisation > 50 % under load; power above the idle baseline; the energy counter
#      increasing; memory used >= what PyTorch allocated; the load's PID seen on its GPU (and
#      mapped to job 1234 with one growing job_gpus interval when the cgroup could be made);
#      values cross-checked against nvidia-smi. Prints PASS/FAIL per check, writes
#      $OUT/summary.json, exits 0 only if every hard check passed.
#
# Environment: PYTHON (agent interpreter), TORCH_PYTHON (load interpreter; default PYTHON),
# WHEELS, LOAD_GIB (8), LOAD_SECONDS (cap, 90), OUT; for a dry run with fakes: CGROUP_FS
# (/sys/fs/cgroup), PROC_ROOT (/proc).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/nvml-check.XXXXXX)}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/nvml_check.log") 2>&1
LOAD_GIB=${LOAD_GIB:-8}
LOAD_SECONDS=${LOAD_SECONDS:-90}
CGROUP_FS=${CGROUP_FS:-/sys/fs/cgroup}
PROC_ROOT=${PROC_ROOT:-/proc}
NODE=$(hostname -s 2>/dev/null || hostname)
echo "nvml_check: repo $REPO, outputs in $OUT, node $NODE, $(date -u +%FT%TZ)"

# ---- 1. prerequisites
if [ -n "${PYTHON:-}" ]; then
    PY=$PYTHON
elif [ -x "$REPO/.venv/bin/python" ] && "$REPO/.venv/bin/python" -c 'import pyarrow' 2>/dev/null; then
    PY=$REPO/.venv/bin/python
else
    PY=$(command -v python3 || command -v python)
fi
if [ -n "${WHEELS:-}" ]; then
    VENV=$OUT/venv
    "$PY" -m venv --system-site-packages "$VENV" \
        && "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELS" \
            nvidia-ml-py pyarrow click \
        && PY=$VENV/bin/python
fi
TPY=${TORCH_PYTHON:-$PY}
nvidia-smi -L > "$OUT/nvidia-smi-L.txt" 2>&1 || echo "nvml_check: nvidia-smi not usable"
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1 || true
missing=$("$PY" - <<'PY'
import importlib.util
print(" ".join(m for m in ("pyarrow", "click", "pynvml") if importlib.util.find_spec(m) is None))
PY
)
if ! "$TPY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    missing="$missing torch-with-cuda(${TPY})"
fi
if [ -n "${missing// /}" ]; then
    echo "FAIL prerequisites: missing $missing (agent python: $PY)"
    echo "{\"ok\": false, \"missing\": \"$missing\"}" > "$OUT/summary.json"
    exit 2
fi
echo "nvml_check: agent python $PY, load python $TPY"

SPOOL=$OUT/spool
LAKE=$OUT/lake
agent() {  # agent <label>: one --once run, output in $OUT/agent_<label>.txt
    local label=$1
    nvidia-smi --query-gpu=uuid,utilization.gpu,power.draw,memory.used,memory.total,temperature.gpu,clocks.sm,clocks.mem \
        --format=csv,noheader,nounits > "$OUT/smi_$label.csv" 2>/dev/null || true
    date -u +%s.%N > "$OUT/t_$label.txt"
    PYTHONPATH=$REPO "$PY" -c \
        'import sys; from app.commands.nvml import command; command(sys.argv[1:], prog_name="gpuledger collect nvml")' \
        --cluster nvml-check --node "$NODE" --once --interval 5 --show-processes \
        --proc-root "$PROC_ROOT" \
        --spool "$SPOOL" --lake "$LAKE" > "$OUT/agent_$label.txt" 2>&1
    echo "$?" > "$OUT/rc_$label.txt"
    echo "--- agent $label (exit $(cat "$OUT/rc_$label.txt"))"
    cat "$OUT/agent_$label.txt"
}

# ---- 2. idle baseline
agent idle

# ---- 3. a fake Slurm job cgroup, and the load inside it
CG=""
CGMODE=none
CGTOP=""
if [ -f "$CGROUP_FS/cgroup.controllers" ]; then
    CGTOP=$CGROUP_FS/gpuledger_check_slurmstepd.scope
    if mkdir -p "$CGTOP/job_1234/step_0/user/task_0" 2>/dev/null; then
        CG=$CGTOP/job_1234/step_0/user/task_0
        CGMODE=v2
    fi
else
    for ctl in freezer pids memory cpu,cpuacct; do
        if [ -d "$CGROUP_FS/$ctl" ] && mkdir -p "$CGROUP_FS/$ctl/slurm/uid_0/job_1234/step_0/task_0" 2>/dev/null; then
            CGTOP=$CGROUP_FS/$ctl/slurm
            CG=$CGTOP/uid_0/job_1234/step_0/task_0
            CGMODE=v1
            break
        fi
    done
fi
rm -f "$OUT/stop" "$OUT/load.json"
(
    if [ -n "$CG" ]; then
        echo "$BASHPID" > "$CG/cgroup.procs" 2>/dev/null \
            || echo "$BASHPID" > "$CG/tasks" 2>/dev/null \
            || echo "nvml_check: could not move the load into $CG" >&2
    fi
    exec "$TPY" "$REPO/scripts/device/nvml_torch_load.py" --ready "$OUT/load.json" \
        --stop "$OUT/stop" --seconds "$LOAD_SECONDS" --gib "$LOAD_GIB"
) > "$OUT/load.log" 2>&1 &
LOAD_PID=$!
echo "nvml_check: load pid $LOAD_PID, cgroup mode $CGMODE ${CG:+($CG)}"
for _ in $(seq 1 120); do
    [ -f "$OUT/load.json" ] && break
    kill -0 "$LOAD_PID" 2>/dev/null || break
    sleep 0.5
done
cat "$PROC_ROOT/$LOAD_PID/cgroup" > "$OUT/load_cgroup.txt" 2>/dev/null || true
if [ ! -f "$OUT/load.json" ]; then
    echo "FAIL load: nvml_torch_load.py did not get ready; its log:"
    cat "$OUT/load.log"
    kill "$LOAD_PID" 2>/dev/null
    echo '{"ok": false, "error": "load did not start"}' > "$OUT/summary.json"
    exit 1
fi
cat "$OUT/load.json"

# ---- 4. the agent under load, then after it
sleep 2
for n in 1 2 3; do
    agent "load$n"
    sleep 3
done
touch "$OUT/stop"
wait "$LOAD_PID"
echo "--- load finished: $(tail -n 1 "$OUT/load.log")"
sleep 1
agent after
if [ -n "$CG" ]; then  # remove the fake job cgroup, leaf first
    d=$CG
    while [ "$d" != "$(dirname "$CGTOP")" ]; do
        rmdir "$d" 2>/dev/null || break
        d=$(dirname "$d")
    done
fi

# ---- 5. checks
PYTHONPATH=$REPO "$PY" - "$OUT" "$CGMODE" <<'PY'
import json
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq

out, cgmode = Path(sys.argv[1]), sys.argv[2]
load = json.loads((out / "load.json").read_text())
pid = load["pid"]
labels = ["idle", "load1", "load2", "load3", "after"]
results = []


def check(name, ok, detail, hard=True):
    status = "PASS" if ok else ("FAIL" if hard else "WARN")
    if ok is None:
        status = "SKIP"
    results.append({"check": name, "status": status, "detail": detail, "hard": hard})
    print(f"{status:4} {name}: {detail}")


def read(table):
    files = sorted(p for p in (out / "lake" / table).rglob("*.parquet") if not p.name.startswith("."))
    return [row for f in files for row in pq.read_table(f).to_pylist()]


rcs = {label: int((out / f"rc_{label}.txt").read_text().strip() or 1) for label in labels}
check("agent runs exit 0", all(rc == 0 for rc in rcs.values()), f"exit codes {rcs}")

# which GPU the load runs on: from the agent's --show-processes lines, cross-checked with torch
seen = {}
for label in labels[1:4]:
    for line in (out / f"agent_{label}.txt").read_text().splitlines():
        m = re.match(rf"pid {pid} on GPU (\d+)(?: MIG \d+)? \((\S+)\): (.*)$", line)
        if m:
            seen[label] = (int(m.group(1)), m.group(2), m.group(3))
check("load PID seen by the agent", len(seen) == 3, f"pid {pid}: {seen or 'not listed'}")
uuid = next(iter(seen.values()))[1] if seen else load.get("gpu_uuid")
if load.get("gpu_uuid"):
    check("agent and PyTorch agree on the GPU", uuid == load["gpu_uuid"], f"agent {uuid}, torch {load['gpu_uuid']}", hard=False)

if cgmode == "none":
    check("PID mapped to Slurm job 1234 via cgroup", None, "no writable cgroup fs here (not root?)")
else:
    mapped = all("Slurm job 1234" in s[2] for s in seen.values()) and len(seen) == 3
    check("PID mapped to Slurm job 1234 via cgroup", mapped, f"{cgmode}: {[s[2] for s in seen.values()]}")
    runs = [r for r in read("job_gpus") if r["job_id"] == "1234" and r["gpu_uuid"] == uuid]
    spans = [(str(r["start_ts"]), str(r["end_ts"]), r["mapping"]) for r in runs]
    check("one job_gpus interval grown over the 3 runs", len(runs) == 1 and runs[0]["mapping"] == "nvml-cgroup", f"{spans}")

samples = [r for r in read("gpu_samples") if r["gpu_uuid"] == uuid]
by_ts = sorted(samples, key=lambda r: r["ts"])
if len(by_ts) < 5:
    check("one sample row per run on the load GPU", False, f"{len(by_ts)} rows")
    by_label = {}
else:
    by_label = dict(zip(labels, by_ts[:5]))
    check("one sample row per run on the load GPU", len(by_ts) == 5, f"{len(by_ts)} rows (MIG: {by_ts[0]['mig_instance']})")

if by_label:
    idle, loaded, after = by_label["idle"], [by_label[k] for k in labels[1:4]], by_label["after"]
    utils = [r["gpu_util_pct"] for r in loaded]
    if any(u is None for u in utils):
        check("utilisation > 50 % under load", None, f"{utils} (null: MIG or unsupported)")
    else:
        check("utilisation > 50 % under load", sum(u > 50 for u in utils) >= 2, f"idle {idle['gpu_util_pct']}, load {utils}")
    powers = [r["power_w"] for r in loaded]
    check("power above the idle baseline", idle["power_w"] is not None and all(p is not None for p in powers)
          and min(powers) > idle["power_w"] + 50, f"idle {idle['power_w']:.1f} W, load {[round(p, 1) for p in powers]} W")
    energy = [r["energy_j"] for r in [idle, *loaded, after]]
    check("energy counter increases", all(a is not None for a in energy) and all(b > a for a, b in zip(energy, energy[1:])),
          f"{[round(e, 1) for e in energy]} J")
    span_s = (loaded[-1]["ts"] - loaded[0]["ts"]).total_seconds()
    if span_s > 0 and energy[1] is not None:
        mean_w = (energy[3] - energy[1]) / span_s
        check("energy slope matches power", abs(mean_w - sum(powers) / 3) < 0.35 * mean_w + 30,
              f"ΔE/Δt {mean_w:.0f} W vs power {sum(powers) / 3:.0f} W", hard=False)
    used = [r["fb_used_mib"] * 2**20 for r in loaded]
    check("memory used >= what PyTorch allocated", all(u >= load["allocated_bytes"] for u in used),
          f"used {[round(u / 2**30, 2) for u in used]} GiB, torch allocated {load['allocated_bytes'] / 2**30:.2f} GiB, reserved {load['reserved_bytes'] / 2**30:.2f} GiB")
    check("memory freed after the load", after["fb_used_mib"] < min(r["fb_used_mib"] for r in loaded),
          f"after {after['fb_used_mib']:.0f} MiB", hard=False)
    sane = (
        10 < loaded[0]["power_w"] < 1500 and 10 <= (loaded[0]["temp_c"] or 0) < 110
        and (loaded[0]["sm_clock_mhz"] or 0) > 100 and (loaded[0]["mem_clock_mhz"] or 0) > 100
    )
    fields = {k: loaded[0][k] for k in ("temp_c", "mem_temp_c", "sm_clock_mhz", "mem_clock_mhz", "clock_event_reasons",
                                         "ecc_sbe_volatile", "ecc_dbe_volatile", "remap_pending", "remap_failure", "xid_last", "model")}
    check("values in plausible ranges", sane, f"{fields}")
    # cross-check with nvidia-smi, read just before each agent run (soft: different instants)
    for label in labels[1:4]:
        rows = [l.split(", ") for l in (out / f"smi_{label}.csv").read_text().splitlines() if l.startswith(uuid)]
        if rows:
            smi_used, ours = float(rows[0][3]), by_label[label]["fb_used_mib"]
            check(f"memory matches nvidia-smi ({label})", abs(smi_used - ours) <= 1024, f"nvidia-smi {smi_used:.0f} MiB, agent {ours:.0f} MiB", hard=False)

nulled = [l for l in (out / "agent_load1.txt").read_text().splitlines() if l.startswith("Fields nulled")]
print("INFO", nulled[0] if nulled else "no summary line")
ok = all(r["status"] in ("PASS", "SKIP", "WARN") for r in results)
(out / "summary.json").write_text(json.dumps({"ok": ok, "cgroup": cgmode, "load": load, "checks": results}, indent=2, default=str))
print(f"nvml_check: {'ALL HARD CHECKS PASSED' if ok else 'SOME CHECKS FAILED'} "
      f"({sum(r['status'] == 'PASS' for r in results)} pass, {sum(r['status'] == 'FAIL' for r in results)} fail, "
      f"{sum(r['status'] == 'WARN' for r in results)} warn, {sum(r['status'] == 'SKIP' for r in results)} skip)")
sys.exit(0 if ok else 1)
PY
status=$?
echo "nvml_check: outputs in $OUT"
exit $status
