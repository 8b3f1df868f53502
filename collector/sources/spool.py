"""A node-local spool: contract tables written atomically, landed in the lake when it is reachable.

Layout: `<spool>/<table>/<batch-id>.parquet` (written by the node agent) and
`<spool>/app_throughput/*.jsonl` (written by applications through `collector.throughput`).
Putting the same batch id again replaces the spooled file, so an interval that grows each tick
is spooled as its latest version only. `land()` hands each file to the lake writer under its
batch id and then deletes it; the writer replaces what a batch id landed before, so a landing
retried after a crash, or a file landed twice, never duplicates rows. While the lake cannot be
written (an OSError: unmounted, read-only, permission), files stay in the spool and the next
`land()` tries again. A file the lake refuses (SchemaMismatch) or that cannot be read is moved to
`<spool>/_rejected/` and counted, so one bad file never blocks the others.

The spool is the agent's alone (root's, on a GPU node): its folders are PRIVATE_DIR_MODE, readable
by the lake's group but not writable by it, unlike the lake's, so nobody else can place a file or
a link where root reads and writes.

The inbox is the exception: any user may drop a throughput file there, so a file is trusted
only as far as its owner (fstat of the open file, never its name): a file owned by root or by
the agent itself is landed as it is; one owned by an ordinary user must claim that owner in its
name (`u<uid>-…`, as `collector.throughput` writes it; else it is rejected), lands under a batch
id that holds the uid (no user can replace another's rows), and keeps only rows of jobs the
lake's `jobs` table says that user owns (the others, and jobs the lake does not know yet, are
refused and counted in `refused_rows`).
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import stat
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collector.throughput import INBOX, claimed_uid
from warehouse import layout
from warehouse.errors import NotWritable, WarehouseError
from warehouse.lake import Lake
from warehouse.schema import RAW_TABLES, spec
from warehouse.writer import atomic_write, conform, write_batch

__all__ = [
    "INBOX_MODE",
    "JobUsers",
    "LandResult",
    "Spool",
    "SpoolFile",
    "Writer",
    "read_throughput_file",
]

logger = logging.getLogger(__name__)

Writer = Callable[[Path, str, pa.Table, str], object]
# (lake, cluster, job ids) -> {job id: its user} for the jobs the lake knows
JobUsers = Callable[[Lake, str, Sequence[str]], Mapping[str, str | None]]

INBOX_MODE: Final = 0o1733  # like /tmp but unlistable: any user may drop a file, none may read
MAX_JSONL_BYTES: Final = 16 << 20
# Allocations before the samples they own, so attribution at ingest finds them.
LANDING_ORDER: Final = ("gpus", "job_gpus", "gpu_samples", "gpu_events", INBOX)
STATE: Final = "_state"
REJECTED: Final = "_rejected"


@dataclass(frozen=True, slots=True)
class SpoolFile:
    """One spooled batch: its table, batch id and file."""

    table: str
    batch_id: str
    path: Path


@dataclass(slots=True)
class LandResult:
    """What one `land()` did: files and rows landed, files rejected, the error that stopped it."""

    files: int = 0
    rows: Counter[str] = field(default_factory=Counter)
    rejected: int = 0
    skipped_lines: int = 0
    refused_rows: int = 0  # throughput rows for jobs their file's owner does not own
    pending: int = 0
    error: str | None = None


def _epoch_ms(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: object) -> int | None:
    """A positive whole number (a parameter count), else None: bools, fractions, NaN, ≥ 2**63."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():  # also NaN and ±inf
        return None
    return int(value) if 0 < value < 2**63 else None


def _open_regular(path: Path) -> tuple[bytes, int]:
    """Read a file that an unprivileged user may have placed: no symlinks, no devices, capped.
    Returns (its bytes, its owner's uid) — both of the file opened, whatever its name."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path}: not a regular file")
        if info.st_size > MAX_JSONL_BYTES:
            raise OSError(f"{path}: larger than {MAX_JSONL_BYTES} bytes")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_JSONL_BYTES + 1), info.st_uid
    finally:
        os.close(fd)


def lake_job_users(lake: Lake, cluster: str, job_ids: Sequence[str]) -> dict[str, str | None]:
    """{job id: user} of the jobs of `job_ids` the lake's `jobs` table has on `cluster`."""
    import duckdb

    from warehouse import queries

    if not job_ids or not lake.table_dir("jobs").is_dir():
        return {}
    try:
        con = lake.connect()
    except WarehouseError:
        return {}
    try:
        found = queries.run_arrow(con, "jobs/job_users", cluster=cluster, job_ids=list(job_ids))
    except duckdb.Error:
        return {}
    finally:
        con.close()
    jobs, users = found.column("job_id").to_pylist(), found.column("user").to_pylist()
    return dict(zip(jobs, users, strict=True))


def read_throughput_file(path: Path, cluster: str) -> tuple[pa.Table, int]:
    """The `app_throughput` rows of one JSONL file written by `collector.throughput`.

    Returns (rows, lines skipped). A line that is not a JSON object with a `job_id` string and
    an integer `ts_ms` is skipped and counted; counter fields that are not numbers become null,
    and so does a `model_params` that is not a positive whole number.
    """
    rows, skipped, _ = read_throughput(path, cluster)
    return rows, skipped


def read_throughput(path: Path, cluster: str) -> tuple[pa.Table, int, int]:
    """`read_throughput_file`, plus the uid that owns the file read."""
    schema = RAW_TABLES[INBOX].schema
    rows: dict[str, list[object]] = {f.name: [] for f in schema}
    skipped = 0
    data, uid = _open_regular(path)
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if not isinstance(record, dict):
            skipped += 1
            continue
        job_id, ts_ms = record.get("job_id"), _epoch_ms(record.get("ts_ms"))
        if not isinstance(job_id, str) or not job_id or ts_ms is None:
            skipped += 1
            continue
        rows["cluster"].append(cluster)
        rows["job_id"].append(job_id)
        rows["ts"].append(ts_ms)
        for name in ("node", "reporter"):
            value = record.get(name)
            rows[name].append(value if isinstance(value, str) and value else None)
        for name in ("samples_total", "tokens_total", "steps_total"):
            rows[name].append(_number(record.get(name)))
        source = record.get("source")
        rows["source"].append(source if isinstance(source, str) and source else "app")
        rows["model_params"].append(_count(record.get("model_params")))
    arrays = [pa.array(rows[f.name], type=f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema), skipped, uid


class Spool:
    """The spool folder at `root` (see module doc)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def state_dir(self) -> Path:
        """`<spool>/_state`: the agent's own small state files (not landed)."""
        return layout.ensure_dir(self.root / STATE, layout.PRIVATE_DIR_MODE)

    def open_inbox(self) -> Path:
        """Create `<spool>/app_throughput` where applications drop their JSONL records."""
        inbox = self.root / INBOX
        if not inbox.is_dir():
            layout.ensure_dir(self.root, layout.PRIVATE_DIR_MODE)
            inbox.mkdir(exist_ok=True)
            os.chmod(inbox, INBOX_MODE)
        return inbox

    def put(self, table: str, batch: pa.Table, batch_id: str) -> Path | None:
        """Spool `batch` for `table` under `batch_id` (replacing an earlier version); None if empty.

        The batch is checked against the contract first, so a bad batch fails here, at its
        source, and never reaches the lake.
        """
        conformed = conform(spec(table), batch)
        if conformed.num_rows == 0:
            return None
        folder = layout.ensure_dir(self.root / table, layout.PRIVATE_DIR_MODE)
        path = folder / f"{layout.safe_name(batch_id)}.parquet"
        atomic_write(conformed, path, batches=None)
        return path

    def pending(self) -> list[SpoolFile]:
        """Every spooled file not yet landed, in landing order (tables, then oldest first)."""
        found: list[tuple[int, int, str, SpoolFile]] = []
        for rank, table in enumerate(LANDING_ORDER):
            folder = self.root / table
            if not folder.is_dir():
                continue
            suffix = ".jsonl" if table == INBOX else ".parquet"
            for path in folder.iterdir():
                if path.name.startswith(".") or path.suffix != suffix:
                    continue
                try:
                    mtime = path.lstat().st_mtime_ns
                except FileNotFoundError:
                    continue
                prefix = "app-" if table == INBOX else ""
                item = SpoolFile(table, layout.safe_name(prefix + path.stem), path)
                found.append((rank, mtime, path.name, item))
        return [item for *_, item in sorted(found, key=lambda f: f[:3])]

    def _reject(self, item: SpoolFile, why: str, result: LandResult) -> None:
        logger.warning("spool: rejected %s: %s", item.path, why)
        rejected = layout.ensure_dir(self.root / REJECTED / item.table, layout.PRIVATE_DIR_MODE)
        target = rejected / item.path.name
        try:
            os.replace(item.path, target)
        except FileNotFoundError:
            pass
        result.rejected += 1

    def _owned_rows(
        self,
        item: SpoolFile,
        table: pa.Table,
        uid: int,
        where: tuple[Lake, str],
        job_users: JobUsers,
        result: LandResult,
    ) -> pa.Table | None:
        """The rows of a throughput file owned by `uid` that it may land (see module doc);
        None when the whole file is refused (and set aside)."""
        claimed = claimed_uid(item.path.name)
        if claimed is None:
            self._reject(item, f"owned by uid {uid}, its name claims no writer (u<uid>-…)", result)
            return None
        if claimed != uid:
            self._reject(item, f"owned by uid {uid}, its name claims uid {claimed}", result)
            return None
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            self._reject(item, f"owned by uid {uid}, which has no user name", result)
            return None
        jobs = sorted(set(table.column("job_id").to_pylist()))
        owners = job_users(*where, jobs)
        mine = [job for job in jobs if owners.get(job) == user]
        kept = table.filter(pc.is_in(table.column("job_id"), pa.array(mine, pa.string())))
        refused = table.num_rows - kept.num_rows
        if refused:
            result.refused_rows += refused
            others = [job for job in jobs if job not in mine]
            logger.warning(
                "spool: %s: %d row(s) refused: user %s does not own job(s) %s (or the lake "
                "does not know them yet)",
                item.path.name,
                refused,
                user,
                ", ".join(others[:5]) + (" …" if len(others) > 5 else ""),
            )
        return kept

    def land(
        self,
        lake: Lake,
        cluster: str,
        *,
        write: Writer = write_batch,
        job_users: JobUsers = lake_job_users,
        trusted_uids: frozenset[int] | None = None,
    ) -> LandResult:
        """Land every pending file in `lake` (see module doc); stop at the first OSError.

        `trusted_uids` (default: root and this process's user) own throughput files that may
        report for any job; `job_users` says who owns a job (default: the lake's `jobs`).
        """
        trusted = trusted_uids if trusted_uids is not None else frozenset({0, os.geteuid()})
        result = LandResult()
        items = self.pending()
        for done, item in enumerate(items):
            try:
                if item.table == INBOX:
                    table, skipped, uid = read_throughput(item.path, cluster)
                    result.skipped_lines += skipped
                    if uid not in trusted:
                        owned = self._owned_rows(
                            item, table, uid, (lake, cluster), job_users, result
                        )
                        if owned is None:
                            continue
                        table = owned
                else:
                    table = pq.read_table(item.path)
            except FileNotFoundError:
                continue
            except (OSError, pa.ArrowException) as exc:
                self._reject(item, f"unreadable: {exc}", result)
                continue
            try:
                write(lake.root, item.table, table, item.batch_id)
            except (OSError, NotWritable) as exc:  # the lake, not the file: keep it for later
                result.error = f"lake {str(lake)!r} not writable: {exc}"
                result.pending = len(items) - done
                logger.warning("spool: %s; %d file(s) kept for later", result.error, result.pending)
                return result
            except WarehouseError as exc:  # the file's rows break the contract
                self._reject(item, str(exc), result)
                continue
            item.path.unlink(missing_ok=True)
            result.files += 1
            result.rows[item.table] += table.num_rows
        return result
