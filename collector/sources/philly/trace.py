"""Import the public Microsoft Philly trace (msr-fiddle/philly-traces) in its own file formats.

Reads `cluster_job_log` (JSON, times in UTC), `cluster_gpu_util` (per-minute CSV, US-Pacific
local time; see `philly.gpu_util`) and `cluster_machine_list`, each plain or gzipped, and lands
`jobs`, `job_gpus`, `gpu_samples` and `gpus`. Samples land unowned: `attribute` assigns them.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import logging
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc

from collector.errors import CollectorError, ConfigError, MalformedSample
from collector.sources.philly.gpu_util import DAMAGED, UtilStats, open_text, read_gpu_util
from warehouse import layout
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.lake import Lake
from warehouse.writer import foreign_file, retract_batches, write_batch

__all__ = [
    "TRACE_FILES",
    "NOTHING_LANDED",
    "ImportResult",
    "JobLog",
    "Machine",
    "Skipped",
    "TraceFiles",
    "find_trace_files",
    "gpu_counts",
    "import_philly",
    "read_job_log",
    "read_machine_list",
]

logger = logging.getLogger(__name__)

TRACE_FILES = ("cluster_job_log", "cluster_gpu_util", "cluster_machine_list")
STATES = {"Pass": "COMPLETED", "Failed": "FAILED", "Killed": "CANCELLED"}
_GPU_NAME = re.compile(r"^gpu(\d+)$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*GB$", re.IGNORECASE)
_NO_TIME = (None, "", "None")
_EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class TraceFiles:
    """Where the three trace files are (each the plain name or the name + `.gz`)."""

    job_log: Path
    gpu_util: Path
    machine_list: Path


def find_trace_files(directory: Path) -> TraceFiles:
    """Find the trace files in `directory`, preferring the plain name over `name.gz`.

    Raises ConfigError naming the folder or every missing file.
    """
    if directory.is_file():
        raise ConfigError(
            f"Philly trace folder {str(directory)!r} is a file, not a folder; expected the "
            "folder that holds cluster_job_log, cluster_gpu_util and cluster_machine_list"
        )
    if not directory.is_dir():
        raise ConfigError(f"Philly trace folder {str(directory)!r} does not exist")
    found: dict[str, Path] = {}
    for name in TRACE_FILES:
        for candidate in (directory / name, directory / f"{name}.gz"):
            if candidate.is_file():
                found[name] = candidate
                break
    missing = [n for n in TRACE_FILES if n not in found]
    if missing:
        raise ConfigError(
            f"Philly trace folder {str(directory)!r} has no {', '.join(missing)} "
            "(looked for each as NAME and NAME.gz)"
        )
    return TraceFiles(*(found[n] for n in TRACE_FILES))


@dataclass(slots=True)
class Skipped:
    """Malformed input that was skipped: how much, and the first few examples."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < _EXAMPLES:
            self.examples.append(example)


@dataclass(frozen=True, slots=True)
class Machine:
    """A row of `cluster_machine_list`: GPUs per machine and memory per GPU (MiB, if given)."""

    gpus: int
    gpu_mem_mib: float | None


def read_machine_list(path: Path, skipped: Skipped) -> dict[str, Machine]:
    """Read `machineId, number of GPUs, single GPU mem` rows; bad rows are added to `skipped`."""
    machines: dict[str, Machine] = {}
    try:
        with open_text(path) as handle:
            for line_no, row in enumerate(csv.reader(handle), start=1):
                cells = [c.strip() for c in row]
                if (line_no == 1 and cells[:1] == ["machineId"]) or not any(cells):
                    continue
                memory = _MEMORY.match(cells[2]) if len(cells) == 3 else None
                damaged = any(DAMAGED in c for c in cells)
                if (
                    damaged
                    or len(cells) != 3
                    or not cells[0]
                    or not cells[1].isdigit()
                    or int(cells[1]) > MAX_GPUS_PER_MACHINE
                ):
                    skipped.add(f"cluster_machine_list line {line_no}: {','.join(row)!r}")
                    continue
                mib = float(memory.group(1)) * 1024 if memory else None
                machines[cells[0]] = Machine(int(cells[1]), mib)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise MalformedSample(f"{path}: cannot be read as CSV: {exc}") from exc
    return machines


def _utc_ms(value: object) -> int | None:
    """Epoch milliseconds of a job-log time (`YYYY-MM-DD HH:MM:SS`, UTC); None if absent."""
    if value in _NO_TIME:
        return None
    if not isinstance(value, str):
        raise ValueError(f"time {value!r} is not a string")
    parsed = dt.datetime.strptime(value.strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
    return int(parsed.timestamp()) * 1000


# No machine has more GPUs (the contract's gpu_index is an int16): a larger count or index is
# a damaged row, skipped as one, where it failed the whole import with a traceback.
MAX_GPUS_PER_MACHINE = 1024


def _gpu_indices(gpus: object) -> list[int]:
    """GPU indices of one `detail` entry: names like `gpu3`, or a bare count n → 0..n−1."""
    if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 0:
        if gpus > MAX_GPUS_PER_MACHINE:
            raise ValueError(f"gpus {gpus!r}: more than a machine has")
        return list(range(gpus))  # a count only: assume the machine's first n GPUs
    if not isinstance(gpus, list):
        raise ValueError(f"gpus {gpus!r} is neither a list nor a count")
    indices = []
    for name in gpus:
        match = _GPU_NAME.match(str(name).strip())
        if match is None:
            raise ValueError(f"GPU name {name!r} is not like 'gpu0'")
        index = int(match.group(1))
        if index >= MAX_GPUS_PER_MACHINE:
            raise ValueError(f"GPU name {name!r}: past the GPUs a machine has")
        indices.append(index)
    return indices


@dataclass(frozen=True, slots=True)
class JobLog:
    """The job log as contract tables, and what it says about the machines it used."""

    jobs: pa.Table
    job_gpus: pa.Table
    allocations: int  # attempts landed as allocations
    attempts_without_times: int  # attempts with no start (or, not last, no end): not landed
    machine_gpus: dict[str, int]  # machine -> 1 + highest GPU index any job held on it
    machine_seen: dict[str, tuple[int, int]]  # machine -> (first start, last end) in ms


@dataclass(slots=True)
class _Parsed:
    row: dict[str, Any]
    allocs: list[tuple[str, int, int, int | None]]  # node, GPU index, start ms, end ms
    attempts: int  # attempts landed as allocations
    unknown: int  # attempts whose span is unknown


def _parse_job(job: object) -> _Parsed:
    """Parse one job of the log; raise ValueError (or KeyError/TypeError) when it is malformed."""
    if not isinstance(job, dict):
        raise ValueError("not a JSON object")
    job_id = job.get("jobid")
    if not isinstance(job_id, str) or not job_id.strip():
        raise ValueError(f"jobid {job_id!r} is missing or empty")
    attempts = job.get("attempts") or []
    if not isinstance(attempts, list):
        raise ValueError("attempts is not a list")
    submit = _utc_ms(job.get("submitted_time"))
    parsed = _Parsed(row={}, allocs=[], attempts=0, unknown=0)
    starts, ends, nodes, gpus = [], [], set(), 0
    running = False
    for n, attempt in enumerate(attempts):
        start, end = _utc_ms(attempt.get("start_time")), _utc_ms(attempt.get("end_time"))
        held: list[tuple[str, int]] = []
        for detail in attempt.get("detail") or []:
            # (a null ip was the machine "None", whose 8 GPUs joined the inventory)
            node = "" if detail["ip"] is None else str(detail["ip"]).strip()
            if not node:
                raise ValueError(f"attempt {n} has a detail entry with an empty ip")
            nodes.add(node)
            held.extend((node, i) for i in _gpu_indices(detail.get("gpus")))
        # each GPU once: a GPU or machine listed twice is one allocation (job_gpus merges them),
        # and counted twice made the job's `gpus` twice what it held
        held = list(dict.fromkeys(held))
        gpus = max(gpus, len(held))
        if end is not None and start is not None and end < start:
            raise ValueError(f"attempt {n} ends before it starts")
        starts += [start] if start is not None else []
        ends += [end] if end is not None else []
        # The trace: a last attempt with a start and no end was still running at the snapshot.
        # Any other attempt without a start or an end is a logging error: its span is unknown.
        running = n == len(attempts) - 1 and start is not None and end is None
        if start is None or (end is None and not running):
            parsed.unknown += 1
        elif held:
            parsed.attempts += 1
            parsed.allocs.extend((node, i, start, end) for node, i in held)
    end_ts = None if running or not ends else max(ends)
    updated = next((t for t in (end_ts, submit, max(starts, default=None)) if t is not None), None)
    if updated is None:
        raise ValueError("no submitted_time and no attempt times")
    status = str(job.get("status") or "").strip()
    user, account = job.get("user"), job.get("vc")
    parsed.row = {
        "job_id": job_id.strip(),
        "user": None if user is None else str(user),
        "account": None if account is None else str(account),
        "state": "RUNNING" if running else STATES.get(status, status.upper() or None),
        "submit_ts": submit,
        "start_ts": min(starts, default=None),
        "end_ts": end_ts,
        # the GPUs it held: none for a job killed before any attempt (as Slurm records a job
        # that never ran); what it asked for the trace does not say (gpus_requested is null)
        "gpus": gpus,
        "nodes": sorted(nodes) if attempts else None,
        "requeues": max(len(attempts) - 1, 0),
        "updated_ts": updated,
    }
    return parsed


def read_job_log(path: Path, cluster: str, skipped: Skipped) -> JobLog:
    """Read `cluster_job_log` into `jobs` and `job_gpus` (one row per attempt × machine × GPU).

    A job that does not parse is skipped and added to `skipped`; so is a repeated job id (the
    first one is kept). Raises MalformedSample when the file is not a JSON list.
    """
    try:
        with open_text(path) as handle:
            text = handle.read()
        records = json.loads(text)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedSample(f"{path}: not a JSON job log: {exc}") from exc
    if not isinstance(records, list):
        raise MalformedSample(f"{path}: expected a JSON list of jobs, got {type(records).__name__}")
    rows: list[dict[str, Any]] = []
    allocs: list[tuple[str, str, int, int, int | None]] = []
    seen: set[str] = set()
    attempts = unknown = 0
    for n, job in enumerate(records):
        if DAMAGED in text and DAMAGED in json.dumps(job, ensure_ascii=False):
            skipped.add(f"cluster_job_log job #{n}: holds bytes that are not UTF-8")
            continue
        try:
            parsed = _parse_job(job)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            skipped.add(f"cluster_job_log job #{n}: {exc}")
            continue
        job_id = parsed.row["job_id"]
        if job_id in seen:
            skipped.add(f"cluster_job_log job #{n}: repeated jobid {job_id!r}")
            continue
        seen.add(job_id)
        rows.append(parsed.row)
        allocs.extend((job_id, *a) for a in parsed.allocs)
        attempts += parsed.attempts
        unknown += parsed.unknown
    machine_gpus: dict[str, int] = {}
    machine_seen: dict[str, tuple[int, int]] = {}
    for _, node, index, start, end in allocs:
        machine_gpus[node] = max(machine_gpus.get(node, 0), index + 1)
        lo, hi = machine_seen.get(node, (start, start))
        machine_seen[node] = (min(lo, start), max(hi, start if end is None else end))
    if skipped.count:
        logger.warning("cluster_job_log: skipped %d malformed jobs", skipped.count)
    return JobLog(
        jobs=_jobs_table(cluster, rows),
        job_gpus=_job_gpus_table(cluster, allocs),
        allocations=attempts,
        attempts_without_times=unknown,
        machine_gpus=machine_gpus,
        machine_seen=machine_seen,
    )


def _ts(values: list[int | None]) -> pa.Array:
    return pa.array(values, pa.int64()).cast(TIMESTAMP)


def _jobs_table(cluster: str, rows: list[dict[str, Any]]) -> pa.Table:
    def col(name: str) -> list[Any]:
        return [r[name] for r in rows]

    n = len(rows)
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cluster), n),
            "job_id": pa.array(col("job_id"), pa.string()),
            "job_id_raw": pa.array(col("job_id"), pa.string()),
            "user": pa.array(col("user"), pa.string()),
            "account": pa.array(col("account"), pa.string()),
            "state": pa.array(col("state"), pa.string()),
            "submit_ts": _ts(col("submit_ts")),
            "start_ts": _ts(col("start_ts")),
            "end_ts": _ts(col("end_ts")),
            "gpus": pa.array(col("gpus"), pa.int32()),
            "nodes": pa.array(col("nodes"), pa.list_(pa.string())),
            "requeues": pa.array(col("requeues"), pa.int32()),
            "source": pa.repeat(pa.scalar("philly"), n),
            "updated_ts": _ts(col("updated_ts")),
        }
    )


def _job_gpus_table(cluster: str, rows: list[tuple[str, str, int, int, int | None]]) -> pa.Table:
    n = len(rows)
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cluster), n),
            "job_id": pa.array([r[0] for r in rows], pa.string()),
            "node": pa.array([r[1] for r in rows], pa.string()),
            "gpu_index": pa.array([r[2] for r in rows], pa.int16()),
            "start_ts": _ts([r[3] for r in rows]),
            "end_ts": _ts([r[4] for r in rows]),
            "mapping": pa.repeat(pa.scalar("trace"), n),
        }
    )


def gpu_counts(machines: dict[str, Machine], evidence: dict[str, int]) -> dict[str, int]:
    """Each machine's GPU count: the machine list's, raised where the trace shows more GPUs.

    `cluster_machine_list` under-counts many machines (msr-fiddle/philly-traces#8: jobs hold
    gpu0–gpu7 on machines listed with 2 GPUs). A raised count is rounded up to the next machine
    size the list knows (2 or 8 in Philly), since a machine with 5 GPUs does not exist there.
    """
    sizes = sorted({m.gpus for m in machines.values() if m.gpus > 0})
    counts = {name: m.gpus for name, m in machines.items()}
    for name, needed in evidence.items():
        listed = counts.get(name, 0)
        if needed > listed:
            counts[name] = next((s for s in sizes if s >= needed), needed)
    return counts


def _gpus_table(
    cluster: str,
    machines: dict[str, Machine],
    counts: dict[str, int],
    seen: dict[str, tuple[int, int]],
) -> pa.Table:
    """The inventory: every GPU of every machine, seen from its first to its last use or sample.

    A machine the trace never shows is given the trace's whole span (it was in the list).
    """
    span = (min(s[0] for s in seen.values()), max(s[1] for s in seen.values()))
    rows: list[tuple[str, int, float | None, int, int]] = []
    for name in sorted(counts):
        listed = machines.get(name)
        # a corrected count makes the listed memory suspect too: leave it unknown
        mib = listed.gpu_mem_mib if listed and listed.gpus == counts[name] else None
        first, last = seen.get(name, span)
        rows.extend((name, i, mib, first, last) for i in range(counts[name]))
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cluster), len(rows)),
            "node": pa.array([r[0] for r in rows], pa.string()),
            "gpu_index": pa.array([r[1] for r in rows], pa.int16()),
            "fb_total_mib": pa.array([r[2] for r in rows], pa.float32()),
            "first_seen": _ts([r[3] for r in rows]),
            "last_seen": _ts([r[4] for r in rows]),
        }
    )


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import landed and what it skipped."""

    cluster: str
    jobs: int
    allocations: int
    job_gpus: int
    samples: int
    gpus: int
    util_lines: int
    malformed: dict[str, int]  # trace file -> malformed lines/records skipped
    examples: tuple[str, ...]
    invalid_values: int  # utilisation cells that were not a number in 0–100: landed as null
    attempts_without_times: int
    machines_recounted: int  # machines with more GPUs in use than cluster_machine_list says
    batches: int
    machine_list_empty: bool = False  # it listed no machine: the inventory is the trace's alone


_TABLES = ("jobs", "job_gpus", "gpu_samples", "gpus")
_OWN = _TABLES[:3]  # a cluster's jobs, allocations and samples: none may be another source's
# staged samples are compressed: the whole trace's are several times its gzipped size unpacked
_STAGED = pa.ipc.IpcWriteOptions(compression="zstd")
NOTHING_LANDED = "nothing was landed: the lake is as it was before this import"


def _staged(tables: Iterable[pa.Table], folder: Path) -> list[Path]:
    """Write each table to an Arrow IPC file in `folder`, to land once all of them were read."""
    paths = []
    for n, table in enumerate(tables):
        path = folder / f"util-{n:05d}.arrow"
        with (
            pa.OSFile(str(path), "wb") as sink,
            pa.ipc.new_file(sink, table.schema, options=_STAGED) as out,
        ):
            out.write_table(table)
        paths.append(path)
    return paths


def _read_staged(path: Path) -> pa.Table:
    with pa.OSFile(str(path), "rb") as source:
        return pa.ipc.open_file(source).read_all()


def _land(
    lake: Lake, cluster: str, batch: str, batches: Iterable[tuple[str, str, pa.Table | Path]]
) -> list[Path]:
    """Land `(table, batch id, rows or their staged file)` in turn. Where one fails and the
    cluster held no earlier import, what this one landed is removed; raises CollectorError
    saying what the lake holds."""
    earlier = any(
        layout.folder_files(layout.partition_dir(lake.root, table, cluster, None)) for table in _OWN
    )
    landed: list[Path] = []
    try:
        for table, batch_id, rows in batches:
            table_rows = _read_staged(rows) if isinstance(rows, Path) else rows
            landed += write_batch(lake.root, table, table_rows, batch_id)
    except Exception as exc:
        if earlier:
            outcome = (
                f"cluster {cluster!r} now holds part of this import and part of the last one: "
                "import again"
            )
        else:
            for table in _TABLES:
                retract_batches(lake.root, table, cluster, f"{batch}-", ())
            outcome = "what it had landed was removed: the lake is as it was before this import"
        raise CollectorError(f"landing the trace failed: {exc}; {outcome}") from exc
    return landed


@contextmanager
def _staging(lake: Lake, cluster: str) -> Iterator[str]:
    """The folder this cluster's import stages its samples in, emptied first and removed
    after: one name per cluster, so what an import killed mid-way (SIGKILL, out of memory)
    left there, up to the trace's samples, goes with the cluster's next import."""
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:16]
    folder = lake.state_dir() / f"philly-import-{digest}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def import_philly(
    directory: Path,
    cluster: str,
    lake: Lake,
    *,
    lines_per_batch: int = 200_000,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Import the Philly trace in `directory` into `lake` under `cluster`.

    Every batch has a fixed id (`philly-<cluster>-jobs`, `…-util-00000`, …), so importing the
    same folder again replaces rather than duplicates; once the whole trace landed, the rows of
    an earlier import into `cluster` that this one did not land again are removed (an updated
    trace replaces the old one whole). Nothing lands before every file was read whole: the
    samples are staged in the lake's `_state/` until then, so a file that cannot be read (a
    truncated `cluster_gpu_util.gz`) fails the import with the lake as it was. `progress(done,
    total)` follows the bytes of `cluster_gpu_util` read.
    """
    if not cluster.strip():
        raise ConfigError("cluster must be a non-empty name")
    files = find_trace_files(directory)
    batch = f"philly-{cluster}"
    for table in _OWN:
        # a trace is a cluster of its own: merged into a cluster's real data, its jobs and
        # samples would count in that cluster's figures, with nothing to tell them apart
        other = foreign_file(lake.root, table, cluster, f"{batch}-")
        if other is not None:
            raise ConfigError(
                f"cluster {cluster!r} already holds {table} that are not this trace's "
                f"({str(other)!r}): import the trace under a cluster name of its own "
                "(e.g. --cluster philly)"
            )
    skipped = {name: Skipped() for name in TRACE_FILES}
    stats = UtilStats()
    with _staging(lake, cluster) as staging:
        try:
            machines = read_machine_list(files.machine_list, skipped["cluster_machine_list"])
            log = read_job_log(files.job_log, cluster, skipped["cluster_job_log"])
            counts = gpu_counts(machines, log.machine_gpus)
            samples = read_gpu_util(
                files.gpu_util,
                cluster,
                counts,
                stats,
                lines_per_batch=lines_per_batch,
                progress=progress,
            )
            staged = _staged(samples, Path(staging))
        except CollectorError as exc:
            raise type(exc)(f"{exc}; {NOTHING_LANDED}") from exc
        except OSError as exc:  # the staging folder's disk
            raise CollectorError(
                f"cannot stage the samples in {staging}: {exc}; {NOTHING_LANDED}"
            ) from exc

        evidence = dict(log.machine_gpus)
        for name, needed in stats.extra_gpus.items():
            evidence[name] = max(evidence.get(name, 0), needed)
        inventory = gpu_counts(machines, evidence)
        seen = dict(log.machine_seen)
        for name, (lo, hi) in stats.seen.items():
            old = seen.get(name, (lo, hi))
            seen[name] = (min(old[0], lo), max(old[1], hi))
        gpus = _gpus_table(cluster, machines, inventory, seen) if seen else None

        batches: list[tuple[str, str, pa.Table | Path]] = [
            ("jobs", f"{batch}-jobs", log.jobs),
            ("job_gpus", f"{batch}-job_gpus", log.job_gpus),
        ]
        batches += [("gpu_samples", f"{batch}-util-{n:05d}", path) for n, path in enumerate(staged)]
        batches += [] if gpus is None else [("gpus", f"{batch}-gpus", gpus)]
        landed = _land(lake, cluster, batch, batches)
    # the last import of this cluster's rows that this one did not land again (days or batches
    # the trace no longer has): gone, so importing an updated trace replaces the old one whole
    for table in _TABLES:
        retract_batches(lake.root, table, cluster, f"{batch}-", landed)
    skipped["cluster_gpu_util"] = Skipped(stats.malformed, stats.examples)
    listed = {name: m.gpus for name, m in machines.items()}
    recounted = sum(1 for name, count in inventory.items() if count > listed.get(name, 0))
    return ImportResult(
        cluster=cluster,
        jobs=log.jobs.num_rows,
        allocations=log.allocations,
        job_gpus=log.job_gpus.num_rows,
        samples=stats.samples,
        gpus=0 if gpus is None else gpus.num_rows,
        util_lines=stats.lines,
        malformed={name: s.count for name, s in skipped.items()},
        examples=tuple(e for s in skipped.values() for e in s.examples),
        invalid_values=stats.invalid_values,
        attempts_without_times=log.attempts_without_times,
        machines_recounted=recounted,
        batches=len(staged),
        machine_list_empty=not machines,
    )
