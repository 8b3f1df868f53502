"""Parse `sacct --parsable2` output into `jobs` rows (DESIGN §3.2); steps fold into their job.

Pure: text in, records out. The collector (`slurm/collect.py`) runs the commands; the
`scontrol show job -d` parser lives in `slurm/scontrol.py` and is re-exported here.

Rules (each decided here, tested in tests/slurm/):

* Fields: `SACCT_FIELDS`, JobName last. A header line (`JobID|JobIDRaw|…`, as `sacct -P`
  prints without `--noheader`) overrides the list, so recorded outputs with other fields parse.
  JobName is the only free-text field: a line with more parts than fields has its extra parts
  joined back into JobName with `|`. Any other field count is a malformed line.
* Times are local to the host that ran sacct: pass its zone as `tz` (the collector runs sacct
  with `TZ=UTC`, so the default is right there). `Unknown`/`None` → null.
* Time limits: `UNLIMITED`/`Partition_Limit` → null; `365-00:00:00` (what backfill records for
  an unlimited job) is kept as 365 days, since that is the limit Slurm enforces.
* GPUs: from AllocTRES (`gpus`) and ReqTRES (`gpus_requested`); the untyped `gres/gpu=N` is the
  total, typed `gres/gpu:h100=N` entries are never added to it. A job that never ran has an
  empty AllocTRES: 0 GPUs allocated.
* Steps (`123.batch`, `123.0`, `123.extern`, `7_1.batch`) are not jobs: the job's `cpu_time_s` is
  the sum of its steps' TotalCPU (the job's own TotalCPU where no step is listed), `max_rss_mib`
  the largest MaxRSS of any step. A step whose job is not in the input is ignored.
* Arrays: tasks keep the display id (`7_1`) as `job_id` and JobIDRaw (`10`) as `job_id_raw`. A
  pending array record (`7_[2-5%2]`) is expanded into one pending job per task (`7_2` … `7_5`),
  so each task later gets new versions under its own id; their `job_id_raw` is null, as Slurm
  only gives a task its own id when it starts.
* Requeues: `Restarts` where sacct has the field (newer than 22.05), else the number of REQUEUED
  records of the job (sacct `--duplicates` lists each earlier run); `submit_ts` is the earliest
  submit of those runs (a requeue resets Submit); the (start, end) of each REQUEUED record is
  kept as `earlier_runs`, so the collector ends that run's GPU rows when it really ended. Other
  duplicate records of one id (a job id reused after a database reset) are ignored in favour
  of the latest.
* Interactive: a step named `interactive` (salloc with `use_interactive_step`); a job named
  `interactive…`, `sys/dashboard…` (Open OnDemand) or a shell (`bash`, `sh`, `zsh`, …); or a job
  without a batch step whose step runs a shell (`srun --pty bash`). Anything else is batch.
* `ReqMem` `4000Mc` is per CPU (× AllocCPUS), `4000Mn` per node (× nodes), plain `16G` is the
  job's; without ReqMem, the `mem=` of ReqTRES (else AllocTRES) is used.
* A line that cannot be parsed is skipped and reported as a `MalformedLine` (line number and
  reason); it never stops the rest of the input.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from collector.errors import MalformedSample
from collector.sources.slurm.fields import (
    MalformedLine,
    base_state,
    parse_duration_s,
    parse_end_ms,
    parse_gpu_tres,
    parse_req_mem,
    parse_size_mib,
    parse_time_limit_s,
    parse_timestamp_ms,
    parse_tres,
)
from collector.sources.slurm.hostlist import expand_hostlist, expand_ranges
from collector.sources.slurm.scontrol import (
    JobGpu,
    ScontrolJob,
    job_gpus_table,
    parse_scontrol_show_job,
)
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.schema import RAW_TABLES

__all__ = [
    "OPTIONAL_SACCT_FIELDS",
    "SACCT_FIELDS",
    "JobGpu",
    "MalformedLine",
    "SacctJob",
    "ScontrolJob",
    "job_gpus_table",
    "jobs_table",
    "parse_sacct",
    "parse_scontrol_show_job",
]

# The fixed --format list. JobName last: it is the only free-text field (see the docstring).
SACCT_FIELDS: tuple[str, ...] = (
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
# Fields only some Slurm versions have (not 22.05); added before JobName when sacct lists them.
OPTIONAL_SACCT_FIELDS: tuple[str, ...] = ("Restarts",)

_JOB_ID = re.compile(
    r"^(?P<job>(?P<base>\d+)(?:_(?P<task>\d+|\[(?P<pending>[^\]]+)\]))?(?:\+\d+)?)"
    r"(?:\.(?P<step>[A-Za-z0-9_+-]+))?$"
)
T = TypeVar("T")
_SHELLS = frozenset({"bash", "sh", "zsh", "tcsh", "csh", "ksh", "fish", "dash"})
_INTERACTIVE_PREFIXES = ("interactive", "sys/dashboard")


@dataclass(frozen=True, slots=True)
class SacctJob:
    """One job folded from its sacct lines: the `jobs` columns the scheduler knows.

    Times are epoch milliseconds UTC; `nodes` is the expanded host list.
    """

    job_id: str
    job_id_raw: str | None
    user: str | None
    account: str | None
    partition: str | None
    qos: str | None
    job_name: str | None
    state: str | None
    exit_code: str | None
    submit_ts: int | None
    start_ts: int | None
    end_ts: int | None
    time_limit_s: int | None
    gpus: int | None
    gpus_requested: int | None
    gpu_type: str | None
    nodes: tuple[str, ...] | None
    cpus: int | None
    mem_req_mib: int | None
    cpu_time_s: float | None
    max_rss_mib: float | None
    interactive: bool
    requeues: int
    # (start, end) of each earlier run of a requeued job that sacct listed (its REQUEUED
    # records): not a `jobs` column, but when that run gave up its GPUs.
    earlier_runs: tuple[tuple[int, int], ...] = ()

    @property
    def finished(self) -> bool:
        """Whether the job has ended (an end time and a state that is not still active)."""
        return self.end_ts is not None and base_state(self.state or "") not in ACTIVE_STATES


# States of a job that may still change (the rest are final).
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETING",
        "CONFIGURING",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
    }
)


@dataclass(frozen=True, slots=True)
class _Line:
    """One parsed sacct line (a job allocation or a step)."""

    line_no: int
    job_id: str
    step: str | None
    pending_tasks: str | None
    raw: dict[str, str]
    submit_ts: int | None
    start_ts: int | None
    end_ts: int | None
    total_cpu_s: float | None
    max_rss_mib: float | None


def _split(line: str, fields: Sequence[str], delimiter: str = "|") -> list[str]:
    parts = line.split(delimiter)
    extra = len(parts) - len(fields)
    if extra > 0 and "JobName" in fields:
        at = list(fields).index("JobName")
        joined = delimiter.join(parts[at : at + extra + 1])
        parts = parts[:at] + [joined] + parts[at + extra + 1 :]
    if len(parts) < len(fields):
        raise MalformedSample(f"{len(parts)} fields, expected {len(fields)} (a truncated line?)")
    if len(parts) > len(fields):
        raise MalformedSample(
            f"{len(parts)} fields, expected {len(fields)} (a '|' in a field other than JobName?)"
        )
    return parts


def _field(values: dict[str, str], name: str, parse: Callable[[str], T]) -> T | None:
    """Parse `values[name]` with `parse`, naming the field in the error; absent field → None."""
    if name not in values:
        return None
    try:
        return parse(values[name])
    except MalformedSample as exc:
        raise MalformedSample(f"{name}: {exc}") from None


def _parse_line(
    line_no: int, line: str, fields: Sequence[str], tz: dt.tzinfo, delimiter: str = "|"
) -> _Line:
    parts = _split(line, fields, delimiter)
    values = {
        name: (part if name == "JobName" else part.strip())
        for name, part in zip(fields, parts, strict=True)
    }
    match = _JOB_ID.match(values.get("JobID", ""))
    if match is None:
        raise MalformedSample(f"JobID: invalid job id {values.get('JobID', '')!r}")
    start = _field(values, "Start", lambda v: parse_timestamp_ms(v, tz))
    return _Line(
        line_no=line_no,
        job_id=match.group("job"),
        step=match.group("step"),
        pending_tasks=match.group("pending"),
        raw=values,
        submit_ts=_field(values, "Submit", lambda v: parse_timestamp_ms(v, tz)),
        start_ts=start,
        end_ts=_field(values, "End", lambda v: parse_end_ms(v, start, tz)),
        total_cpu_s=_field(values, "TotalCPU", parse_duration_s),
        max_rss_mib=_field(values, "MaxRSS", lambda v: parse_size_mib(v, "B")),
    )


def _text(values: dict[str, str], name: str) -> str | None:
    value = values.get(name)
    return value if value else None


def _int(values: dict[str, str], name: str) -> int | None:
    value = values.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise MalformedSample(f"{name}: invalid count {value!r}")
    return int(value)


def _is_interactive(name: str | None, steps: Sequence[_Line]) -> bool:
    lowered = (name or "").strip().lower()
    if lowered in _SHELLS or lowered.startswith(_INTERACTIVE_PREFIXES):
        return True
    step_ids = {s.step for s in steps}
    if "interactive" in step_ids:
        return True
    step_names = {(s.raw.get("JobName") or "").strip().lower() for s in steps}
    return "batch" not in step_ids and bool(step_names & _SHELLS)


def _mem_req_mib(values: dict[str, str], cpus: int | None, nodes: int) -> int | None:
    mib, per = _field(values, "ReqMem", parse_req_mem) or (None, "")
    if mib is None:
        for name in ("ReqTRES", "AllocTRES"):
            mem = _field({name: values.get(name, "")}, name, lambda v: parse_tres(v).get("mem"))
            if mem:
                return round(_field({name: mem}, name, parse_size_mib) or 0)
        return None
    if per == "c":
        return round(mib * cpus) if cpus is not None else None
    if per == "n":
        return round(mib * max(nodes, 1))
    return round(mib)


def _fold(job_id: str, runs: list[_Line], steps: list[_Line], listed: set[str]) -> list[SacctJob]:
    """Fold one job's records (its runs, with --duplicates) and its steps into jobs.

    A pending array record expands into its tasks, except those `listed` with their own record.
    """
    requeued = [r for r in runs if base_state(r.raw.get("State", "")).startswith("REQUEUE")]
    latest_runs = [r for r in runs if r not in requeued] or runs
    current = max(latest_runs, key=lambda r: (r.submit_ts or 0, r.line_no))
    values = current.raw
    submits = [r.submit_ts for r in (current, *requeued) if r.submit_ts is not None]
    alloc = _field(values, "AllocTRES", parse_tres)
    req = _field(values, "ReqTRES", parse_tres)
    gpus, gpu_type = parse_gpu_tres(alloc) if alloc is not None else (None, None)
    gpus_requested, req_type = parse_gpu_tres(req) if req is not None else (None, None)
    nodes = _field(values, "NodeList", expand_hostlist)
    cpus = _int(values, "AllocCPUS")
    if cpus is None and alloc and alloc.get("cpu", "").isdigit():
        cpus = int(alloc["cpu"])
    step_cpu = [s.total_cpu_s for s in steps if s.total_cpu_s is not None]
    rss = [r.max_rss_mib for r in (*runs, *steps) if r.max_rss_mib is not None]
    job = SacctJob(
        job_id=job_id,
        job_id_raw=_text(values, "JobIDRaw"),
        user=_text(values, "User"),
        account=_text(values, "Account"),
        partition=_text(values, "Partition"),
        qos=_text(values, "QOS"),
        job_name=values.get("JobName") or None,
        state=_text(values, "State"),
        exit_code=_text(values, "ExitCode"),
        submit_ts=min(submits) if submits else None,
        start_ts=current.start_ts,
        end_ts=current.end_ts,
        time_limit_s=_field(values, "Timelimit", parse_time_limit_s),
        gpus=gpus,
        gpus_requested=gpus_requested,
        gpu_type=gpu_type or req_type,
        nodes=tuple(nodes) if isinstance(nodes, list) else None,
        cpus=cpus,
        mem_req_mib=_mem_req_mib(values, cpus, len(nodes) if isinstance(nodes, list) else 0),
        cpu_time_s=sum(step_cpu) if step_cpu else current.total_cpu_s,
        max_rss_mib=max(rss) if rss else None,
        interactive=_is_interactive(values.get("JobName"), steps),
        requeues=max(_int(values, "Restarts") or 0, len(requeued)),
        earlier_runs=tuple(
            sorted(
                (r.start_ts, r.end_ts)
                for r in requeued
                if r.start_ts is not None and r.end_ts is not None
            )
        ),
    )
    if current.pending_tasks is None:
        return [job]
    # A pending array record: one pending job per task, none of them with an id of its own yet.
    base = job_id.split("_", 1)[0]
    tasks = _field({"JobID": current.pending_tasks}, "JobID", expand_ranges) or []
    expanded = (f"{base}_{int(t)}" for t in tasks)
    return [
        dataclasses.replace(job, job_id=i, job_id_raw=None) for i in expanded if i not in listed
    ]


def _header(line: str, delimiter: str = "|") -> list[str] | None:
    parts = [p.strip() for p in line.split(delimiter)]
    if parts and parts[0].lower() == "jobid" and all(p.isalnum() for p in parts):
        return parts
    return None


def parse_sacct(
    text: str,
    *,
    fields: Sequence[str] | None = None,
    tz: dt.tzinfo = dt.UTC,
    delimiter: str = "|",
) -> tuple[list[SacctJob], list[MalformedLine]]:
    """Parse `sacct --parsable2` output into jobs (steps folded in) and the lines skipped.

    Args:
        text: sacct's standard output, with or without the header line.
        fields: the `--format` list the output was made with (default `SACCT_FIELDS`); a header
            line in `text` takes precedence.
        tz: the time zone sacct printed its times in.
        delimiter: what separates the fields (sacct's `--delimiter`). The collector gives one
            of its own, unknown to users, new each call: Slurm stores a job name as given, and
            a name `real\n600|600|carol|…` made a second line that `|` read as a record of its
            own, replacing the job's user, GPUs and times; without the delimiter that line is
            one malformed field, skipped and said.

    Returns:
        The jobs in order of first appearance, and one `MalformedLine` per skipped line.
    """
    columns = list(fields or SACCT_FIELDS)
    malformed: list[MalformedLine] = []
    runs: dict[str, list[_Line]] = {}
    steps: dict[str, list[_Line]] = {}
    header_seen = False
    for line_no, line in enumerate(text.splitlines(), start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        header = _header(line, delimiter)
        if header is not None:
            if not header_seen:
                columns, header_seen = header, True
            continue
        try:
            parsed = _parse_line(line_no, line, columns, tz, delimiter)
        except MalformedSample as exc:
            malformed.append(MalformedLine("sacct", line_no, str(exc)))
            continue
        target = steps if parsed.step is not None else runs
        target.setdefault(parsed.job_id, []).append(parsed)
    jobs: list[SacctJob] = []
    listed = set(runs)
    for job_id, job_runs in runs.items():
        try:
            jobs.extend(_fold(job_id, job_runs, steps.get(job_id, []), listed))
        except MalformedSample as exc:
            malformed.append(MalformedLine("sacct", job_runs[-1].line_no, str(exc)))
    return jobs, sorted(malformed, key=lambda m: m.line_no)


def jobs_table(
    cluster: str, jobs: Iterable[SacctJob], updated_ts_ms: int, source: str = "slurm"
) -> pa.Table:
    """Build a `jobs` Arrow table (the contract's exact types) from parsed jobs."""
    rows = list(jobs)
    schema = RAW_TABLES["jobs"].schema
    n = len(rows)

    def col(name: str) -> list[object]:
        return [getattr(job, name) for job in rows]

    def ts(name: str) -> pa.Array:
        return pa.array(col(name), pa.int64()).cast(TIMESTAMP)

    columns: dict[str, pa.Array] = {
        "cluster": pa.array([cluster] * n, pa.string()),
        "submit_ts": ts("submit_ts"),
        "start_ts": ts("start_ts"),
        "end_ts": ts("end_ts"),
        "nodes": pa.array(
            [None if j.nodes is None else list(j.nodes) for j in rows], pa.list_(pa.string())
        ),
        "source": pa.array([source] * n, pa.string()),
        "updated_ts": pa.array([updated_ts_ms] * n, pa.int64()).cast(TIMESTAMP),
    }
    arrays = [
        columns[f.name] if f.name in columns else pa.array(col(f.name), f.type) for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
