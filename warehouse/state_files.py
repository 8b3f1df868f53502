"""Every SQLite state file gpuledger keeps: its name, what it holds, where it lives, its schema
and how an older file is brought up to it (`STATE_FILES`), and the one way to open one
(`open_state`).

State that is updated in place lives in SQLite (DESIGN §3.7): in the lake's `<root>/_state/`,
or, for a node agent, in its spool's `_state/`. Each file records the version of its schema in
SQLite's `PRAGMA user_version`:

- equal to the spec's `version`: opened as it is (no DDL on every open);
- 0 and the file empty (new): the spec's `schema` is created and the version stamped;
- lower (0 with tables in it is a file from before versions): `migrations[v + 1]`, … up to the
  spec's version run in order, in one `BEGIN IMMEDIATE` transaction, after the version is read
  again under the lock, so two processes opening the file at once migrate it once. Migration 1
  takes a file from before versions to version 1: its statements are written for any shape such
  a file may have (`IF NOT EXISTS`, `IF EXISTS`), so it also creates whatever is missing;
- higher: StateFileTooNew, one line (the file was written by a newer gpuledger).

Bumping a schema: add its statements as `migrations[version + 1]`, change `schema` to the new
shape and `version` to the new number; tests/warehouse/test_state_files.py checks that the
migrations from an empty file end in exactly the shape `schema` creates.
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from warehouse import layout
from warehouse.errors import DamagedFile, StateFileTooNew

__all__ = [
    "ALERTS",
    "ATTRIBUTION",
    "COMPACTION",
    "DCGM_EXPORTER",
    "KUBERNETES",
    "NVML_EVENTS",
    "PROMETHEUS",
    "SLURM",
    "STATE_FILES",
    "Location",
    "StateFile",
    "ensure_schema",
    "open_state",
    "state_path",
]

SPOOL_STATE: Final = "_state"  # a node agent's state folder in its spool (collector.sources.spool)


class Location(enum.Enum):
    """Where a state file lives."""

    LAKE = "the lake's _state/"
    SPOOL = "a node agent's spool _state/"


@dataclass(frozen=True, slots=True)
class StateFile:
    """One SQLite state file: `name` in the `_state/` folder of `location`, holding `holds`.

    `schema`: the statements that create version `version` in an empty file. `migrations[v]`:
    the statements that take a file at version v - 1 to v (1: from before versions)."""

    name: str
    holds: str
    location: Location
    version: int
    schema: tuple[str, ...]
    migrations: Mapping[int, tuple[str, ...]]

    def __post_init__(self) -> None:
        if sorted(self.migrations) != list(range(1, self.version + 1)):
            raise ValueError(f"{self.name}: migrations must be 1..{self.version}")


# ---------------------------------------------------------------------------- the lake's files

_PROMETHEUS_V1: Final = (
    """CREATE TABLE IF NOT EXISTS checkpoints (
    cluster TEXT NOT NULL,
    source TEXT NOT NULL,
    selector TEXT NOT NULL,
    url TEXT NOT NULL,
    window_s INTEGER NOT NULL,
    done_until_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (cluster, source)
)""",
)
PROMETHEUS: Final = StateFile(
    name="prometheus.sqlite",
    holds="per cluster and label selector, the end of the last complete window pulled",
    location=Location.LAKE,
    version=1,
    schema=_PROMETHEUS_V1,
    migrations={1: _PROMETHEUS_V1},
)

_SLURM_V1: Final = (
    """CREATE TABLE IF NOT EXISTS checkpoint (
    cluster TEXT PRIMARY KEY,
    window_end_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS job (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    finished INTEGER NOT NULL,
    requeues INTEGER NOT NULL,
    submit_ms INTEGER,
    missing_runs INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster, job_id)
)""",
    "CREATE INDEX IF NOT EXISTS job_unfinished ON job (cluster, finished)",
    """CREATE TABLE IF NOT EXISTS job_gpu (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    gpu_index INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER,
    mapping TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (cluster, job_id, node, gpu_index, start_ms)
)""",
    "CREATE INDEX IF NOT EXISTS job_gpu_batch ON job_gpu (cluster, batch_id)",
    "CREATE INDEX IF NOT EXISTS job_gpu_open ON job_gpu (cluster, end_ms)",
)
SLURM: Final = StateFile(
    name="slurm.sqlite",
    holds="the Slurm collector's window checkpoint, landed jobs' hashes and job_gpus rows",
    location=Location.LAKE,
    version=1,
    schema=_SLURM_V1,
    migrations={1: _SLURM_V1},
)

_KUBERNETES_V1: Final = (
    """CREATE TABLE IF NOT EXISTS checkpoint (
    cluster TEXT PRIMARY KEY,
    collected_ms INTEGER NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS pod (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    pod_uid TEXT,
    content_hash TEXT NOT NULL,
    finished INTEGER NOT NULL,
    gone_state TEXT NOT NULL,
    workload TEXT,
    row_json TEXT NOT NULL,
    PRIMARY KEY (cluster, job_id)
)""",
    "CREATE INDEX IF NOT EXISTS pod_unfinished ON pod (cluster, finished)",
    """CREATE TABLE IF NOT EXISTS queue (
    cluster TEXT NOT NULL,
    row_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    namespace TEXT,
    content_hash TEXT NOT NULL,
    deleted INTEGER NOT NULL,
    row_json TEXT NOT NULL,
    PRIMARY KEY (cluster, row_key)
)""",
    """CREATE TABLE IF NOT EXISTS job_gpu (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (cluster, job_id, node, start_ms)
)""",
    "CREATE INDEX IF NOT EXISTS job_gpu_batch ON job_gpu (cluster, batch_id)",
)
# Version 2: the jobs rows of a run, staged as an Arrow IPC stream with its state before they
# land (collector/sources/kubernetes/collect.py): a run killed after landing them and before
# its state committed left pods the state never heard of, which no later run ended
_KUBERNETES_V2_STEP: Final = (
    "CREATE TABLE IF NOT EXISTS job_outbox ("
    " batch_id TEXT PRIMARY KEY, cluster TEXT NOT NULL, rows BLOB NOT NULL)",
)
KUBERNETES: Final = StateFile(
    name="kubernetes.sqlite",
    holds="the Kubernetes collector's checkpoint, landed pods, queues and whole-node job_gpus, "
    "and the jobs rows staged to land",
    location=Location.LAKE,
    version=2,
    schema=_KUBERNETES_V1 + _KUBERNETES_V2_STEP,
    migrations={1: _KUBERNETES_V1, 2: _KUBERNETES_V2_STEP},
)

_EVENT_LATCH_V1: Final = (
    "CREATE TABLE IF NOT EXISTS event_latch (cluster TEXT NOT NULL, gpu_uuid TEXT NOT "
    "NULL, kind TEXT NOT NULL, code INTEGER, PRIMARY KEY (cluster, gpu_uuid, kind))",
)
# the events staged before they land (dcgm-exporter) or spool (the NVML agent), as an Arrow IPC
# stream, per cluster
_EVENT_OUTBOX_V2: Final = (
    "CREATE TABLE IF NOT EXISTS event_outbox ("
    " batch_id TEXT PRIMARY KEY, cluster TEXT NOT NULL, events BLOB NOT NULL)",
)
DCGM_EXPORTER: Final = StateFile(
    name="dcgm_exporter.sqlite",
    holds="the GPU health conditions (XID, ECC, clock reasons) last landed from dcgm-exporter, "
    "and those staged to land",
    location=Location.LAKE,
    version=2,
    schema=_EVENT_LATCH_V1 + _EVENT_OUTBOX_V2,
    migrations={1: _EVENT_LATCH_V1, 2: _EVENT_OUTBOX_V2},
)

_ATTRIBUTION_V1: Final = (
    # warehouse/partitions.py: the inputs each sample day's marts were built from
    "CREATE TABLE IF NOT EXISTS sample_days_built ("
    " cluster TEXT, date TEXT, own TEXT, next TEXT, PRIMARY KEY (cluster, date))",
    # the owner check's record of the sample files it had rewritten (gone in version 2)
    "CREATE TABLE IF NOT EXISTS checked_files ("
    " path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, allocations TEXT)",
    # warehouse/summary/state.py: what the summary marts were built from
    "CREATE TABLE IF NOT EXISTS summary_built (inputs TEXT, marts TEXT, index_fp TEXT)",
    "CREATE TABLE IF NOT EXISTS summary_days ("
    " cluster TEXT, date TEXT, digest TEXT, PRIMARY KEY (cluster, date))",
    "CREATE TABLE IF NOT EXISTS summary_records (path TEXT PRIMARY KEY, stamp TEXT)",
    "CREATE TABLE IF NOT EXISTS summary_record_jobs (path TEXT, cluster TEXT, job_id TEXT)",
)
# Version 2: raw files are never rewritten (owners are decided in the per-day pass), so no
# sample file is checked against the allocations any more; every day is built once again (its
# recorded inputs now name the allocations that own its samples).
_ATTRIBUTION_V2_STEP: Final = ("DROP TABLE IF EXISTS checked_files",)
# warehouse/partitions.py: per cluster folder, the bucket width its pruned days were built with
_ATTRIBUTION_V3_STEP: Final = (
    "CREATE TABLE IF NOT EXISTS pruned_buckets ("
    " cluster TEXT PRIMARY KEY, bucket_s INTEGER NOT NULL)",
)
ATTRIBUTION: Final = StateFile(
    name="attribution.sqlite",
    holds="what each built mart partition was built from: sample days and summary marts",
    location=Location.LAKE,
    version=3,
    schema=tuple(q for q in _ATTRIBUTION_V1 if "checked_files" not in q) + _ATTRIBUTION_V3_STEP,
    migrations={1: _ATTRIBUTION_V1, 2: _ATTRIBUTION_V2_STEP, 3: _ATTRIBUTION_V3_STEP},
)

_COMPACTION_V1: Final = (
    "CREATE TABLE IF NOT EXISTS reader_merges ("
    " reader TEXT, tbl TEXT, cluster TEXT, date TEXT, before BLOB, after TEXT,"
    " PRIMARY KEY (reader, tbl, cluster, date))",
)
COMPACTION: Final = StateFile(
    name="compaction.sqlite",
    holds="per reader and merged day partition, its file listings before and after the merge",
    location=Location.LAKE,
    version=2,
    schema=_COMPACTION_V1,
    # `merges`: one entry for all readers, from before compaction_log.READERS; version 2: the
    # owner check (a reader) is gone with the rewriting of sample files, and its entries
    migrations={
        1: ("DROP TABLE IF EXISTS merges", *_COMPACTION_V1),
        2: ("DELETE FROM reader_merges WHERE reader = 'owner_check'",),
    },
)

_ALERTS_V1: Final = (
    """CREATE TABLE IF NOT EXISTS notices (
    id INTEGER PRIMARY KEY,
    cluster TEXT NOT NULL,
    finding_id TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    detector TEXT NOT NULL,
    stage INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    severity TEXT NOT NULL,
    test_mode INTEGER NOT NULL,
    created_ts TEXT NOT NULL,
    summary TEXT NOT NULL,       -- JSON: the notice's line in the admins' digest
    digest_key TEXT,             -- the digest that listed it (null: not yet)
    UNIQUE (cluster, finding_id, stage, fingerprint, test_mode)
)""",
    "CREATE INDEX IF NOT EXISTS notices_subject ON notices (subject_key, detector, test_mode)",
    """CREATE TABLE IF NOT EXISTS messages (
    key TEXT PRIMARY KEY,
    notice_id INTEGER REFERENCES notices (id),
    kind TEXT NOT NULL,          -- notice | digest
    role TEXT NOT NULL,          -- owner | manager | admin
    channel TEXT NOT NULL,       -- email | slack | webhook
    recipient TEXT NOT NULL,
    payload TEXT NOT NULL,       -- JSON: subject, text, html, slack_text, blocks
    state TEXT NOT NULL,         -- pending | sending | delivered | failed
    attempts INTEGER NOT NULL DEFAULT 0,
    next_try_ts TEXT NOT NULL,
    created_ts TEXT NOT NULL,
    updated_ts TEXT NOT NULL,
    delivered_ts TEXT,
    last_error TEXT
)""",
    "CREATE INDEX IF NOT EXISTS messages_state ON messages (state, next_try_ts)",
    """CREATE TABLE IF NOT EXISTS message_notices (
    key TEXT NOT NULL REFERENCES messages (key),   -- one message (a person's digest) ...
    notice_id INTEGER NOT NULL REFERENCES notices (id),  -- ... tells of these notices ...
    role TEXT NOT NULL,                            -- ... each in this role (owner, manager)
    PRIMARY KEY (key, notice_id)
)""",
    """CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL REFERENCES messages (key),
    ts TEXT NOT NULL,
    outcome TEXT NOT NULL,       -- sending | delivered | retry | deferred | failed | requeued
    detail TEXT
)""",
    """CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY,
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    finding_id TEXT NOT NULL,
    argv TEXT NOT NULL,          -- JSON list: exactly what was run
    started_ts TEXT NOT NULL,
    finished_ts TEXT,
    returncode INTEGER,
    output TEXT,
    UNIQUE (cluster, job_id)
)""",
)
ALERTS: Final = StateFile(
    name="alerts.sqlite",
    holds="the alert ledger: notices, messages and their delivery attempts, actions run",
    location=Location.LAKE,
    version=1,
    schema=_ALERTS_V1,
    migrations={1: _ALERTS_V1},
)

# ------------------------------------------------------------------------ a node agent's files

NVML_EVENTS: Final = StateFile(
    name="nvml_events.sqlite",
    holds="the GPU health conditions (ECC, row remapping, clock reasons) last spooled by the "
    "NVML agent, and the events of a tick staged to spool",
    location=Location.SPOOL,
    version=2,
    schema=_EVENT_LATCH_V1 + _EVENT_OUTBOX_V2,
    migrations={1: _EVENT_LATCH_V1, 2: _EVENT_OUTBOX_V2},
)

STATE_FILES: Final[tuple[StateFile, ...]] = (
    PROMETHEUS,
    SLURM,
    KUBERNETES,
    DCGM_EXPORTER,
    ATTRIBUTION,
    COMPACTION,
    ALERTS,
    NVML_EVENTS,
)


def state_path(root_or_path: Path, spec: StateFile) -> Path:
    """The file `spec` of the lake (or spool) at `root_or_path`, its `_state/` folder made;
    `root_or_path` itself where it names a `.sqlite` file."""
    if root_or_path.suffix == ".sqlite":
        return root_or_path
    if spec.location is Location.LAKE:
        return layout.state_dir(root_or_path) / spec.name
    return layout.ensure_dir(root_or_path / SPOOL_STATE, layout.PRIVATE_DIR_MODE) / spec.name


def open_state(
    root_or_path: Path, spec: StateFile, timeout_s: float = 30.0, *, autocommit: bool = False
) -> sqlite3.Connection:
    """Open the state file `spec` (`state_path`) at its schema's current version.

    Opened as `layout.open_private_db` opens it (SHARED_FILE_MODE, no symbolic links,
    NotWritable, DamagedFile); with `autocommit` the caller issues BEGIN/COMMIT itself. Raises
    StateFileTooNew for a file a newer gpuledger wrote."""
    path = state_path(root_or_path, spec)
    con = layout.open_private_db(path, timeout_s, autocommit=autocommit)
    try:
        ensure_schema(con, spec, path)
    except sqlite3.DatabaseError as exc:  # its header read, its pages not (cut short, overwritten)
        con.close()
        if isinstance(exc, sqlite3.OperationalError):  # locked, busy: not damage
            raise
        raise DamagedFile(path, str(exc), "SQLite state") from exc
    except BaseException:
        con.close()
        raise
    return con


def ensure_schema(con: sqlite3.Connection, spec: StateFile, path: Path) -> None:
    """Bring the open database `con` (the file `path`, or a copy of it) to `spec`'s version
    (module doc); a no-op when it is there. Call it outside a transaction."""
    found = _version(con)
    if found == spec.version:
        return
    if found > spec.version:  # refused before taking the write lock
        raise StateFileTooNew(path, found, spec.version)
    mode = con.isolation_level
    con.isolation_level = None  # our own BEGIN/COMMIT (executescript would commit early)
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            _upgrade(con, spec, path)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.isolation_level = mode


def _upgrade(con: sqlite3.Connection, spec: StateFile, path: Path) -> None:
    found = _version(con)  # again, under the lock: another process may have done it
    if found > spec.version:
        raise StateFileTooNew(path, found, spec.version)
    if found == spec.version:
        return
    if found == 0 and not con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
        statements = spec.schema
    else:
        statements = tuple(
            s for v in range(found + 1, spec.version + 1) for s in spec.migrations[v]
        )
    for statement in statements:
        con.execute(statement)
    con.execute(f"PRAGMA user_version = {int(spec.version)}")  # a pragma binds no parameters


def _version(con: sqlite3.Connection) -> int:
    return int(con.execute("PRAGMA user_version").fetchone()[0])
