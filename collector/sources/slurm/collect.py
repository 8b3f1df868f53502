"""Collect Slurm jobs and GPU allocations into the lake, incrementally (`gpuledger collect slurm`).

One run asks Slurm a fixed, small number of questions, never one per job:

1. `sacct --helpformat` (local, no database call): which optional fields this sacct has.
2. `sacct … --starttime=<checkpoint − overlap> --endtime=<now>`: every job eligible, running or
   ending in the window, any state (no `--state`: with it sacct narrows to jobs in those states
   at those times), with their steps and `--duplicates` (earlier runs of requeued jobs).
3. `sacct … --jobs=<ids>` for jobs last seen unfinished or holding GPUs that the window did
   not list (in chunks of `JOB_IDS_PER_CALL`), e.g. a job whose end slurmdbd recorded late.
   A job sacct does not list for `MAX_MISSING_RUNS` runs in a row is no longer asked for.
4. `scontrol show job -d`: the GPU indices of every running job.

A job lands as a new `jobs` version (updated_ts = now) only when its content differs from what
was landed before, so a second run lands nothing and a job that finished in between lands once
more (`jobs_latest` picks it). Running jobs' GPUs land as open `job_gpus` rows, one batch per
allocation run (named by its job and start, so a run killed before its state committed lands
them again under the same name); when a job ends its rows are closed (end = the job's end) by
re-landing that batch, so the lake never keeps an open copy of a closed row. Nothing is landed
and the checkpoint does not move unless every command succeeded.

Times: the default runner runs sacct and scontrol with `TZ=UTC`, so their local times are UTC
and `tz` stays UTC. An injected runner that cannot set the environment (a wrapper over ssh, a
replay of recorded output) passes the zone its times are printed in. In a zone with daylight
saving time the hour repeated when it ends is ambiguous: a window in it is asked an hour wider,
an end that would read before its start is taken in the second occurrence, and any other time
in that hour in the first (a job from 00:30 EDT to 01:30 EST reads an hour short). Such a
runner should print epoch seconds (`SLURM_TIME_FORMAT=%s`), which are read as such.
"""

from __future__ import annotations

import atexit
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import secrets
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from collector.errors import CollectorError, ConfigError
from collector.sources.slurm.fields import MalformedLine, base_state, parse_timestamp_ms
from collector.sources.slurm.sacct import (
    OPTIONAL_SACCT_FIELDS,
    SACCT_FIELDS,
    SacctJob,
    jobs_table,
    parse_sacct,
)
from collector.sources.slurm.scontrol import (
    HOLDING_STATES,
    JobGpu,
    ScontrolJob,
    job_gpus_table,
    parse_scontrol_show_job,
)
from collector.sources.slurm.state import SlurmState, StoredJob, open_state
from warehouse.lake import Lake
from warehouse.writer import write_batch

__all__ = [
    "DEFAULT_OVERLAP",
    "JOB_IDS_PER_CALL",
    "Runner",
    "SlurmCollectResult",
    "SlurmCommandError",
    "collect_slurm",
    "run_command",
]

logger = logging.getLogger(__name__)

Runner = Callable[[list[str]], str]
"""Runs one command given as an argument list (never a shell string) and returns its stdout."""

DEFAULT_OVERLAP = dt.timedelta(minutes=10)
DEFAULT_FIRST_WINDOW = dt.timedelta(days=1)
DEFAULT_TIMEOUT_S = 300.0
JOB_IDS_PER_CALL = 500
_HOUR = dt.timedelta(hours=1)
MAX_MISSING_RUNS = 3  # stop asking by id for an unfinished job sacct no longer lists
_REQUIRED_FIELDS = ("JobID", "JobIDRaw", "State", "Submit")
_SACCT_BASE = ("sacct", "--parsable2", "--noheader", "--allusers", "--duplicates")


class SlurmCommandError(CollectorError):
    """A Slurm command is missing, failed or timed out (the run lands nothing)."""

    def __init__(self, message: str, argv: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.argv = tuple(argv)


# the Slurm commands running now: a process that exits (the service stopped while sacct hung)
# ends them, or they would run on, reparented to init
_RUNNING: set[subprocess.Popen[str]] = set()


@atexit.register
def _end_running() -> None:
    for proc in list(_RUNNING):
        proc.kill()


def run_command(argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Run `argv` (no shell) with `TZ=UTC` and Slurm's standard time format; return stdout.

    Raises SlurmCommandError naming the command when it is not installed, exits non-zero
    (e.g. slurmdbd is down) or takes longer than `timeout_s`.
    """
    name = argv[0] if argv else "?"
    # Times in UTC whatever the host's zone, and in the format the parsers read.
    env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    try:
        with subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ) as proc:
            _RUNNING.add(proc)
            try:
                stdout, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise
            finally:
                _RUNNING.discard(proc)
    except FileNotFoundError:
        raise SlurmCommandError(
            f"{name!r} not found on PATH: run the Slurm collector on a host with the Slurm "
            "client commands (sacct, scontrol) installed",
            argv,
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmCommandError(
            f"{name} did not answer within {timeout_s:g} s (is slurmctld/slurmdbd overloaded?)",
            argv,
        ) from None
    except OSError as exc:
        raise SlurmCommandError(f"could not run {name!r}: {exc}", argv) from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (stderr or stdout or "").splitlines()]
        detail = next((ln for ln in reversed(lines) if ln), "no error message")
        raise SlurmCommandError(f"{name} failed (exit {proc.returncode}): {detail}", argv)
    return stdout


@dataclass(frozen=True, slots=True)
class SlurmCollectResult:
    """What one run saw and landed."""

    cluster: str
    batch_id: str
    window_start: dt.datetime
    window_end: dt.datetime
    jobs_seen: int
    jobs_new: int
    jobs_updated: int
    gpu_rows_opened: int
    gpu_rows_closed: int
    unmapped_jobs: tuple[str, ...]
    malformed: tuple[MalformedLine, ...]
    commands: int

    @property
    def jobs_landed(self) -> int:
        return self.jobs_new + self.jobs_updated


def _ms(value: dt.datetime) -> int:
    return int(value.timestamp() * 1000)


def _slurm_time(value: dt.datetime, tz: dt.tzinfo, *, outward: dt.timedelta) -> str:
    """`value` as Slurm's local time in `tz`, moved by `outward` where that text is ambiguous.

    In the hour repeated when daylight saving time ends, the local text names two instants and
    sacct may read either: a window's start moved an hour earlier and its end an hour later
    read as no narrower a window, whichever instant sacct takes.
    """
    text = value.astimezone(tz).strftime("%Y-%m-%dT%H:%M:%S")
    if parse_timestamp_ms(text, tz) != parse_timestamp_ms(text, tz, fold=1):
        text = (value + outward).astimezone(tz).strftime("%Y-%m-%dT%H:%M:%S")
    return text


def _digest(job: SacctJob) -> str:
    """The hash of what a job lands as; earlier runs are not landed (and leave the window)."""
    content = dataclasses.asdict(job)
    del content["earlier_runs"]
    payload = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def sacct_fields(helpformat: str) -> tuple[str, ...]:
    """The `--format` list for a sacct whose `--helpformat` printed `helpformat`.

    The fixed `SACCT_FIELDS`, plus the optional fields this version has (before JobName, which
    stays last). Output that lists no field at all gives the fixed list.
    """
    available = {word.lower() for word in helpformat.split()}
    if not available:
        return SACCT_FIELDS
    missing = [f for f in _REQUIRED_FIELDS if f.lower() not in available]
    if missing:
        raise ConfigError(f"this sacct lacks the field(s) {missing!r}; is it really Slurm's sacct?")
    fields = [f for f in SACCT_FIELDS if f.lower() in available and f != "JobName"]
    fields += [f for f in OPTIONAL_SACCT_FIELDS if f.lower() in available]
    return (*fields, "JobName")


def _merge_sticky(job: SacctJob, before: StoredJob | None) -> SacctJob:
    """Keep what must not go backwards between versions: requeues, and the first submit time.

    sacct lists an earlier run of a requeued job only while that run is in the window.
    """
    if before is None:
        return job
    submits = [s for s in (job.submit_ts, before.submit_ms) if s is not None]
    return dataclasses.replace(
        job,
        requeues=max(job.requeues, before.requeues),
        submit_ts=min(submits) if submits else None,
    )


class _Commands:
    """The runner, counting calls and collecting malformed lines."""

    def __init__(self, runner: Runner, tz: dt.tzinfo) -> None:
        self.runner = runner
        self.tz = tz
        self.calls = 0
        self.malformed: list[MalformedLine] = []

    def run(self, argv: Sequence[str]) -> str:
        self.calls += 1
        return self.runner(list(argv))

    def sacct(self, fields: Sequence[str], *selection: str) -> list[SacctJob]:
        # a delimiter no user can know (one per call): a job name with a line break cannot
        # make a record of its own (sacct.parse_sacct)
        delimiter = f"|{secrets.token_hex(6)}|"
        text = self.run(
            [*_SACCT_BASE, f"--delimiter={delimiter}", f"--format={','.join(fields)}", *selection]
        )
        jobs, malformed = parse_sacct(text, fields=fields, tz=self.tz, delimiter=delimiter)
        self.malformed.extend(malformed)
        return jobs

    def scontrol_jobs(self) -> list[ScontrolJob]:
        jobs, malformed = parse_scontrol_show_job(
            self.run(["scontrol", "show", "job", "-d"]), tz=self.tz
        )
        self.malformed.extend(malformed)
        return jobs


def _ask_slurm(
    commands: _Commands, state: SlurmState, start: dt.datetime, end: dt.datetime
) -> tuple[dict[str, SacctJob], list[str], list[ScontrolJob]]:
    """Run every command of one collection; return sacct's jobs, ids asked for, scontrol's jobs."""
    fields = sacct_fields(commands.run(["sacct", "--helpformat"]))
    window = (
        f"--starttime={_slurm_time(start, commands.tz, outward=-_HOUR)}",
        f"--endtime={_slurm_time(end, commands.tz, outward=_HOUR)}",
    )
    jobs = {job.job_id: job for job in commands.sacct(fields, *window)}
    # Jobs last seen unfinished, or holding GPUs, that the window did not list: ask for them
    # by id, in chunks.
    wanted = {*state.unfinished_job_ids(MAX_MISSING_RUNS), *state.open_gpu_job_ids()}
    asked = sorted(wanted - set(jobs))
    for at in range(0, len(asked), JOB_IDS_PER_CALL):
        chunk = asked[at : at + JOB_IDS_PER_CALL]
        for job in commands.sacct(fields, f"--jobs={','.join(chunk)}"):
            jobs.setdefault(job.job_id, job)
    return jobs, asked, _vouched(commands, jobs, commands.scontrol_jobs())


def _vouched(
    commands: _Commands, jobs: dict[str, SacctJob], listed: list[ScontrolJob]
) -> list[ScontrolJob]:
    """The jobs of scontrol whose GPUs may be read: those sacct lists with the same user and
    nodes, one copy of each. A job's name or comment may hold a line break and a whole record
    (`JobId=777 … UserId=eve … Nodes=gpu09 GRES=gpu:8(IDX:0-7)`): a job sacct does not know, or
    a second copy of one it does, comes from there. Where several copies agree with sacct,
    which is Slurm's cannot be told, and none is read; each left out is said. A job too new
    for slurmdbd is read at the next run (its allocation's start is kept)."""
    agreeing: dict[str, list[ScontrolJob]] = {}
    for job in listed:
        known = jobs.get(job.job_id)
        # (the nodes of a job that holds GPUs: a pending or ended copy maps none)
        same_nodes = known is not None and (
            not job.allocations or known.nodes is None or set(known.nodes) == set(job.nodes)
        )

        if known is not None and known.user == job.user and same_nodes:
            agreeing.setdefault(job.job_id, []).append(job)
        elif job.holds_resources and job.allocations:
            reason = (
                "sacct does not list it" if known is None else "sacct lists another user or nodes"
            )
            commands.malformed.append(
                MalformedLine("scontrol", 0, f"job {job.job_id}: {reason}; its GPUs are not read")
            )
    vouched = []
    for job_id, copies in agreeing.items():
        if len(copies) == 1:
            vouched.append(copies[0])
        else:
            commands.malformed.append(
                MalformedLine(
                    "scontrol",
                    0,
                    f"job {job_id} is listed {len(copies)} times; its GPUs are not read",
                )
            )
    return vouched


def _land_jobs(
    root: Path, cluster: str, state: SlurmState, jobs: dict[str, SacctJob], batch: str, now: int
) -> tuple[int, int]:
    """Land the jobs whose content changed; return (new, updated)."""
    known = state.jobs(jobs)
    changed: list[SacctJob] = []
    new = 0
    for job_id, job in jobs.items():
        before = known.get(job_id)
        job = _merge_sticky(job, before)
        digest = _digest(job)
        if before is not None and before.content_hash == digest:
            continue
        changed.append(job)
        new += before is None
        state.save_job(job_id, digest, job.finished, job.requeues, job.submit_ts)
    write_batch(root, "jobs", jobs_table(cluster, changed, now), batch)
    return new, len(changed) - new


def _unmapped(
    jobs: dict[str, SacctJob], vouched: list[ScontrolJob], mapped_before: set[str]
) -> tuple[str, ...]:
    """The running jobs holding GPUs that no `job_gpus` row maps: scontrol gives no index for
    their GPUs, or no record of them that can be read (one its own name or comment made
    unreadable, copies that cannot be told apart, none at all), and none was mapped before.
    Their samples stay unattributed: said, so a job cannot hide its usage unnoticed."""
    mapped = {j.job_id for j in vouched if j.allocations and not j.unmapped_gpus} | mapped_before
    unmapped = {j.job_id for j in vouched if j.holds_resources and j.unmapped_gpus}
    for job_id, job in jobs.items():
        running = job.state is not None and base_state(job.state) in HOLDING_STATES
        if running and job.start_ts is not None and job.gpus and job_id not in mapped:
            unmapped.add(job_id)
    return tuple(sorted(unmapped, key=lambda job_id: (len(job_id), job_id)))


def _land_gpus(
    root: Path,
    state: SlurmState,
    jobs: dict[str, SacctJob],
    running: list[ScontrolJob],
    now: int,
) -> tuple[int, int]:
    """Open rows for newly seen allocations, close rows of jobs that ended; return the counts."""
    touched: set[str] = set()
    opened = 0
    current: dict[str, ScontrolJob] = {j.job_id: j for j in running}
    for job in running:
        # A job that ended while scontrol still lists it comes with closed rows.
        if not job.holds_resources and not all(a.end_ts is not None for a in job.allocations):
            continue
        for row in job.allocations:
            if not state.has_gpu_row(row):
                # one batch per allocation run, named by it alone (not by this run's window):
                # a run killed after its files landed but before its state committed lands
                # them again under the same name, replacing them, where an open copy was left
                # behind that no later run closed (its job charged to the end of the data)
                landed = _gpu_batch(state.cluster, row)
                state.add_gpu_row(row, landed)
                touched.add(landed)
                opened += 1
    closed = 0
    for row, row_batch in state.open_gpu_rows():
        end = _end_of(row, jobs.get(row.job_id), current.get(row.job_id), now)
        if end is not None:
            state.close_gpu_row(row, max(end, row.start_ts))
            touched.add(row_batch)
            closed += 1
    for landed in sorted(touched):
        rows = state.gpu_rows_of_batch(landed)
        write_batch(root, "job_gpus", job_gpus_table(state.cluster, rows), landed)
    return opened, closed


def _gpu_batch(cluster: str, row: JobGpu) -> str:
    """The batch of an allocation run's `job_gpus` rows: its cluster, job and start."""
    digest = hashlib.sha256(f"{cluster}\n{row.job_id}\n{row.start_ts}".encode()).hexdigest()
    return f"slurm-{cluster}-gpus-{row.start_ts}-{digest[:16]}"


def _end_of(row: JobGpu, job: SacctJob | None, live: ScontrolJob | None, now: int) -> int | None:
    """When an open `job_gpus` row ended, or None while its job still holds it."""
    if job is not None:
        # A run that was requeued: sacct recorded when it ended (scontrol only shows the job
        # pending again, or running again from a later start).
        for start, end in job.earlier_runs:
            if start == row.start_ts:
                return end
    if job is not None and job.finished and job.end_ts is not None:
        return job.end_ts
    if live is None:
        # Gone from slurmctld: wait for sacct to record its end, unless sacct does not know
        # the job at all (not even asked by id): then it ended by now.
        return now if job is None else None
    if not live.holds_resources:
        return live.end_ts if live.end_ts is not None else now  # e.g. requeued: pending again
    if live.start_ts is not None and live.start_ts > row.start_ts:
        return live.start_ts  # restarted (requeued) since: the earlier run ended by then
    return None


def collect_slurm(
    lake: Lake,
    cluster: str,
    runner: Runner = run_command,
    *,
    since: dt.datetime | None = None,
    now: dt.datetime | None = None,
    tz: dt.tzinfo = dt.UTC,
    overlap: dt.timedelta = DEFAULT_OVERLAP,
    first_window: dt.timedelta = DEFAULT_FIRST_WINDOW,
) -> SlurmCollectResult:
    """Collect one window of Slurm jobs and running jobs' GPUs into `lake`.

    Args:
        root: the lake root; state lives in `<root>/_state/slurm.sqlite`.
        cluster: the name to land rows under.
        runner: runs one command (argument list) and returns its stdout; raises
            SlurmCommandError when the command fails.
        since: start of the window; default: the last checkpoint minus `overlap`, or
            `now - first_window` on the first run.
        now: end of the window (default: the current time); also each new version's updated_ts.
        tz: the time zone the runner's commands print times in.

    Raises:
        SlurmCommandError: a command is missing or failed; nothing landed, checkpoint kept.
        ConfigError: a window that ends before it starts, or a naive `since`/`now`.
    """
    if not cluster.strip():
        raise ConfigError("cluster must not be empty")
    end = now or dt.datetime.now(dt.UTC)
    for name, value in (("since", since), ("now", end)):
        if value is not None and value.tzinfo is None:
            raise ConfigError(f"{name} must be timezone-aware, got {value.isoformat()!r}")
    end = end.replace(microsecond=0)
    end_ms = _ms(end)
    commands = _Commands(runner, tz)
    with open_state(lake.root, cluster) as state:
        checkpoint = state.checkpoint_ms()
        if since is not None:
            start = since
        elif checkpoint is not None:
            start = dt.datetime.fromtimestamp(checkpoint / 1000, dt.UTC) - overlap
        else:
            start = end - first_window
        start = start.astimezone(dt.UTC).replace(microsecond=0)
        if start >= end:
            raise ConfigError(
                f"the window starts at {start.isoformat()!r}, not before its end "
                f"{end.isoformat()!r}; give a --since in the past"
            )
        jobs, asked, scontrol_jobs = _ask_slurm(commands, state, start, end)
        batch = f"slurm-{cluster}-{start:%Y%m%dT%H%M%S}-{end:%Y%m%dT%H%M%S}"
        new, updated = _land_jobs(lake.root, cluster, state, jobs, batch, end_ms)
        mapped_before = set(state.open_gpu_job_ids())
        opened, closed = _land_gpus(lake.root, state, jobs, scontrol_jobs, end_ms)
        state.mark_asked([j for j in asked if j in jobs], [j for j in asked if j not in jobs])
        state.set_checkpoint(end_ms, end_ms)
    if commands.malformed:
        logger.warning(
            "slurm %s: skipped %d malformed line(s), first: %s",
            cluster,
            len(commands.malformed),
            commands.malformed[0],
        )
    unmapped = _unmapped(jobs, scontrol_jobs, mapped_before)
    return SlurmCollectResult(
        cluster=cluster,
        batch_id=batch,
        window_start=start,
        window_end=end,
        jobs_seen=len(jobs),
        jobs_new=new,
        jobs_updated=updated,
        gpu_rows_opened=opened,
        gpu_rows_closed=closed,
        unmapped_jobs=unmapped,
        malformed=tuple(commands.malformed),
        commands=commands.calls,
    )
