"""The live test cluster (tests/infra/slurm) and the tests' own plain readings of sacct/scontrol.

The readings are deliberately simple and share no code with the collector's parsers, which they
check: sacct `-P` lines split on `|` under their header, `scontrol show job -d` split on
whitespace, times as epoch seconds (`SLURM_TIME_FORMAT=%s`, where the collector reads Slurm's
standard local-time format), host lists expanded by `scontrol show hostnames`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INFRA = Path(__file__).resolve().parents[1] / "infra" / "slurm"
STATE_DIR = Path(os.environ.get("GPULEDGER_SLURM_DIR", "/var/tmp/gpuledger-slurm"))
LOCK_FILE = STATE_DIR.with_name(STATE_DIR.name + ".lock")
CLUSTER = "testcluster"
# The real programs, whatever a test puts first on PATH later.
_PATH = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
# The programs start_slurm.sh and these tests run (Debian: slurm-wlm slurmdbd mariadb-server munge).
PROGRAMS = (
    "munged",
    "mariadbd",
    "mariadb-install-db",
    "slurmdbd",
    "slurmctld",
    "slurmd",
    "sacctmgr",
    "sacct",
    "sbatch",
    "scancel",
    "scontrol",
    "squeue",
    "sinfo",
    "runuser",
    "useradd",
)
SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "User",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "Timelimit",
    "AllocTRES",
    "ReqTRES",
    "NodeList",
    "AllocCPUS",
    "ReqMem",
    "TotalCPU",
    "MaxRSS",
    "JobName",
)
# Job script: print the GPUs the job was given, then wait until the test releases it.
GATED_SCRIPT = """#!/bin/bash
echo "node=$SLURMD_NODENAME gpus=${SLURM_JOB_GPUS:-}"
while [ ! -e "$GATE_DIR/release-$SLURM_JOB_ID" ]; do sleep 1; done
"""


class ClusterError(AssertionError):
    """The test cluster did not do what a test needed (shown with the command's output)."""


@dataclass
class SlurmCluster:
    """Starts, stops and talks to the test cluster; every command runs with its SLURM_CONF."""

    conf: Path
    jobs_dir: Path = field(default=STATE_DIR / "jobs")

    def env(self) -> dict[str, str]:
        return {
            "PATH": _PATH,
            "LANG": "C.UTF-8",
            "SLURM_CONF": str(self.conf),
            "GATE_DIR": str(self.jobs_dir),
            "TZ": "UTC",
            "SLURM_TIME_FORMAT": "%s",
        }

    def run(self, *argv: str, user: str | None = None, timeout: float = 60) -> str:
        """Run a Slurm command (as `user` via runuser) and return its stdout; raise on failure."""
        cmd = ["runuser", "-u", user, "--", *argv] if user else list(argv)
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=self.env(), timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    # ---- the daemons

    def start(self, *, fresh: bool = False) -> None:
        _script("start_slurm.sh", *(["--fresh"] if fresh else []))

    def stop(self, *daemons: str) -> None:
        _script("stop_slurm.sh", *daemons)

    # ---- jobs

    def submit(self, user: str, *options: str, wrap: str | None = None) -> str:
        """sbatch as `user`; without `wrap` the job runs GATED_SCRIPT. Returns the job id."""
        script = self.jobs_dir / "gated.sh"
        if not script.exists():
            script.write_text(GATED_SCRIPT, encoding="utf-8")
            script.chmod(0o755)
        target = ["--wrap", wrap] if wrap is not None else [str(script)]
        out = self.run(
            "sbatch",
            "--parsable",
            "--chdir=/tmp",
            f"--output={self.jobs_dir}/%j.out",
            *options,
            *target,
            user=user,
        )
        return out.strip().split(";", 1)[0]

    def release(self, job_id: str) -> None:
        """Let a GATED_SCRIPT job finish (exit 0)."""
        (self.jobs_dir / f"release-{job_id}").touch()

    def job_output(self, job_raw_id: str) -> str:
        return (self.jobs_dir / f"{job_raw_id}.out").read_text(encoding="utf-8")

    def sacct(self, *selection: str) -> list[dict[str, str]]:
        """`sacct -a -P --duplicates` lines (allocations and steps) as {field: value}."""
        out = self.run(
            "sacct", "-a", "-P", "--duplicates", f"--format={','.join(SACCT_FIELDS)}", *selection
        )
        header, *lines = out.splitlines()
        names = header.split("|")
        rows = []
        for line in lines:
            parts = line.split("|")
            assert len(parts) == len(names), f"unexpected sacct line {line!r}"
            rows.append(dict(zip(names, parts, strict=True)))
        return rows

    def settled_sacct(self, *selection: str, timeout: float = 30) -> list[dict[str, str]]:
        """sacct() once two readings a second apart agree (a daemon that just came back may
        still be sending records)."""
        deadline = time.monotonic() + timeout
        last = self.sacct(*selection)
        while True:
            time.sleep(1)
            now = self.sacct(*selection)
            if now == last:
                return now
            if time.monotonic() > deadline:
                raise ClusterError(f"sacct kept changing for {timeout:g} s")
            last = now

    def sacct_job(self, job_id: str) -> dict[str, str] | None:
        """The allocation line of one job's latest run (array tasks by their `123_4` id);
        None until slurmctld has sent the job to slurmdbd."""
        rows = self.sacct_runs(job_id)
        return rows[-1] if rows else None

    def sacct_runs(self, job_id: str) -> list[dict[str, str]]:
        """The allocation lines of one job: one per run (a requeued job has several)."""
        return [r for r in self.sacct(f"--jobs={job_id}", "-X") if r["JobID"] == job_id]

    def scontrol_jobs(self) -> dict[str, dict[str, Any]]:
        """`scontrol show job -d`, each job as its key=value words plus `gpu_idx`.

        `gpu_idx` maps each node to the GPU indices of the `Nodes=… GRES=gpu:…(IDX:…)` lines.
        """
        jobs: dict[str, dict[str, Any]] = {}
        for record in re.split(r"\n\s*\n", self.run("scontrol", "show", "job", "-d")):
            words = record.split()
            if not words or not words[0].startswith("JobId="):
                continue
            job: dict[str, Any] = {}
            gpu_idx: dict[str, list[int]] = {}
            for line in record.splitlines():
                pairs = dict(w.split("=", 1) for w in line.split() if "=" in w)
                if "Nodes" in pairs and "GRES" in pairs:
                    match = re.search(r"gpu(?::\w+)?:\d+\(IDX:([^)]*)\)", pairs["GRES"])
                    if match:
                        for node in self.hostnames(pairs["Nodes"]):
                            gpu_idx[node] = _ranges(match.group(1))
                    continue
                job.update(pairs)
            job["gpu_idx"] = gpu_idx
            job_id = job["JobId"]
            if "ArrayTaskId" in job:
                job_id = f"{job['ArrayJobId']}_{job['ArrayTaskId']}"
            jobs[job_id] = job
        return jobs

    def hostnames(self, hostlist: str) -> list[str]:
        if hostlist in ("", "None assigned", "(null)"):
            return []
        return self.run("scontrol", "show", "hostnames", hostlist).split()

    def wait_for(self, what: str, ready: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(0.5)

    def wait_ended(self, job_id: str, state: str, timeout: float = 60) -> None:
        """Wait until sacct records `job_id` in `state` with its end time (both are needed:
        right after slurmdbd comes back sacct can show the final state before the end time)."""

        def ended() -> bool:
            row = self.sacct_job(job_id)
            return (
                row is not None
                and row["State"].startswith(state)
                and row["End"] not in ("Unknown", "None")
            )

        self.wait_for(f"job {job_id} to end {state}", ended, timeout)

    def wait_state(self, job_id: str, state: str, timeout: float = 60) -> None:
        def there() -> bool:
            row = self.sacct_job(job_id)
            return row is not None and row["State"].startswith(state)

        self.wait_for(f"job {job_id} to be {state}", there, timeout)


def _script(name: str, *args: str, timeout: float = 300) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["GPULEDGER_SLURM_DIR"] = str(STATE_DIR)
    done = subprocess.run(
        ["bash", str(INFRA / name), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ClusterError(
            f"{name} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
        )


def missing_programs() -> list[str]:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [p for p in PROGRAMS if shutil.which(p, path=path) is None]


def _ranges(text: str) -> list[int]:
    """`0-1,4` → [0, 1, 4]."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


# ---- plain conversions of sacct values (the tests' own, see the module docstring)


def epoch_ms(value: str) -> int | None:
    return None if value in ("", "Unknown", "None") else int(value) * 1000


def seconds(value: str) -> float | None:
    """`[D-][HH:]MM:SS[.fff]` → seconds; the no-limit words → None."""
    if value in ("", "UNLIMITED", "Partition_Limit"):
        return None
    days, _, clock = value.rpartition("-")
    parts = [float(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    hours, minutes, secs = parts
    return (int(days or 0) * 24 + hours) * 3600 + minutes * 60 + secs


def mib(value: str, bare: str = "M") -> float | None:
    """`1G`, `1024M`, `3500K`, or a bare number in unit `bare` (B for MaxRSS) → MiB."""
    if not value:
        return None
    units = {"B": 1 / 1024**2, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2}
    if value[-1].isdigit():
        return float(value) * units[bare]
    return float(value[:-1]) * units[value[-1].upper()]


def tres(value: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in value.split(",") if item)


def expected_jobs(cluster: SlurmCluster, lines: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """What `jobs` must hold for each job of these sacct lines (steps folded into their job).

    A requeued job has one allocation line per run (`--duplicates`): the last one is the job,
    the REQUEUED ones count its requeues, and the first submit is its submit time.
    """
    runs: dict[str, list[dict[str, str]]] = {}
    steps: dict[str, list[dict[str, str]]] = {}
    for row in lines:
        if "." in row["JobID"]:
            steps.setdefault(row["JobID"].split(".", 1)[0], []).append(row)
        else:
            runs.setdefault(row["JobID"], []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for job_id, job_runs in runs.items():
        requeued = [r for r in job_runs if r["State"].startswith("REQUEUED")]
        row = ([r for r in job_runs if r not in requeued] or job_runs)[-1]
        submits = [epoch_ms(r["Submit"]) for r in (row, *requeued)]
        alloc, req = tres(row["AllocTRES"]), tres(row["ReqTRES"])
        typed = sorted(k.split(":", 1)[1] for k in alloc if k.startswith("gres/gpu:"))
        typed = typed or sorted(k.split(":", 1)[1] for k in req if k.startswith("gres/gpu:"))
        job_steps = steps.get(job_id, [])
        step_cpu = [seconds(s["TotalCPU"]) for s in job_steps if s["TotalCPU"]]
        rss = [mib(r["MaxRSS"], "B") for r in [*job_runs, *job_steps] if r["MaxRSS"]]
        limit = seconds(row["Timelimit"])
        req_mem = mib(row["ReqMem"])
        out[job_id] = {
            "cluster": CLUSTER,
            "job_id": job_id,
            "job_id_raw": row["JobIDRaw"],
            "user": row["User"],
            "account": row["Account"],
            "partition": row["Partition"],
            "qos": row["QOS"],
            "job_name": row["JobName"],
            "state": row["State"],
            "exit_code": row["ExitCode"],
            "submit_ts": min(s for s in submits if s is not None),
            "start_ts": epoch_ms(row["Start"]),
            "end_ts": epoch_ms(row["End"]),
            "time_limit_s": None if limit is None else round(limit),
            "gpus": int(alloc.get("gres/gpu", 0)),
            "gpus_requested": int(req.get("gres/gpu", 0)),
            "gpu_type": ",".join(typed) or None,
            "nodes": cluster.hostnames(row["NodeList"]),  # [] when none is assigned yet
            "cpus": int(row["AllocCPUS"]),
            "mem_req_mib": None if req_mem is None else round(req_mem),
            "cpu_time_s": sum(s for s in step_cpu if s is not None)
            if step_cpu
            else seconds(row["TotalCPU"]),
            "max_rss_mib": max(r for r in rss if r is not None) if rss else None,
            "interactive": False,
            "requeues": len(requeued),
            "source": "slurm",
        }
    return out


@dataclass(frozen=True)
class Workload:
    """Job ids by role (array tasks as `123_4`)."""

    timeout: str  # alice, research: 1-minute limit, sleeps longer → TIMEOUT
    multi: str  # alice, research: 2 h100, running; released between two runs → COMPLETED
    array: tuple[str, ...]  # bob, ml: --array=1-3, one GPU each → 3 × COMPLETED
    failed: str  # carol in research (not her default ml): an srun step, then exit 1 → FAILED
    cancelled: str  # bob, ml: cancelled by bob while running → CANCELLED by <uid>
    dbd_gated: str  # bob, ml: 2 a100, running; released while slurmdbd is down
    ctld_gated: str  # carol, ml: 1 GPU, running; released while slurmctld is down
    running: str  # carol, ml: 2 nodes × 1 GPU, still running when the tests end
    pending: str  # bob, ml: 4 a100 while `running` holds one of the 4 → stays PENDING
    requeued: str  # alice, research: 1 h100, running; requeued, runs again, then released

    @property
    def holding_gpus(self) -> tuple[str, ...]:
        """The jobs running (and holding GPUs) at the first collection."""
        return (self.multi, self.dbd_gated, self.ctld_gated, self.running, self.requeued)

    @property
    def all(self) -> tuple[str, ...]:
        singles = (self.timeout, self.multi, self.failed, self.cancelled, self.dbd_gated)
        return (*singles, self.ctld_gated, self.running, self.pending, self.requeued, *self.array)
