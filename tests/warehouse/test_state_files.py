"""warehouse/state_files.py: every SQLite state file, its schema version and migrations.

The `OLD_SCHEMAS` below are copied from the code as it stood before state files had versions
(each module's own CREATE strings), so that a lake made then keeps opening unchanged.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sqlite3
import stat
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from app.errors import reports_errors
from warehouse import layout, state_files
from warehouse.errors import DamagedFile, NotWritable, StateFileTooNew
from warehouse.state_files import STATE_FILES, Location, StateFile, open_state

REPO = Path(__file__).resolve().parents[2]

# The CREATE statements each module ran on every open before schema versions (user_version 0).
OLD_SCHEMAS: dict[str, str] = {
    "prometheus.sqlite": """
CREATE TABLE IF NOT EXISTS checkpoints (
    cluster TEXT NOT NULL,
    source TEXT NOT NULL,
    selector TEXT NOT NULL,
    url TEXT NOT NULL,
    window_s INTEGER NOT NULL,
    done_until_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (cluster, source)
)
""",
    "slurm.sqlite": """
CREATE TABLE IF NOT EXISTS checkpoint (
    cluster TEXT PRIMARY KEY,
    window_end_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS job (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    finished INTEGER NOT NULL,
    requeues INTEGER NOT NULL,
    submit_ms INTEGER,
    missing_runs INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster, job_id)
);
CREATE INDEX IF NOT EXISTS job_unfinished ON job (cluster, finished);
CREATE TABLE IF NOT EXISTS job_gpu (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    gpu_index INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER,
    mapping TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (cluster, job_id, node, gpu_index, start_ms)
);
CREATE INDEX IF NOT EXISTS job_gpu_batch ON job_gpu (cluster, batch_id);
CREATE INDEX IF NOT EXISTS job_gpu_open ON job_gpu (cluster, end_ms);
""",
    "kubernetes.sqlite": """
CREATE TABLE IF NOT EXISTS checkpoint (
    cluster TEXT PRIMARY KEY,
    collected_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pod (
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
);
CREATE INDEX IF NOT EXISTS pod_unfinished ON pod (cluster, finished);
CREATE TABLE IF NOT EXISTS queue (
    cluster TEXT NOT NULL,
    row_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    namespace TEXT,
    content_hash TEXT NOT NULL,
    deleted INTEGER NOT NULL,
    row_json TEXT NOT NULL,
    PRIMARY KEY (cluster, row_key)
);
CREATE TABLE IF NOT EXISTS job_gpu (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (cluster, job_id, node, start_ms)
);
CREATE INDEX IF NOT EXISTS job_gpu_batch ON job_gpu (cluster, batch_id);
""",
    "alerts.sqlite": """
CREATE TABLE IF NOT EXISTS notices (
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
);
CREATE INDEX IF NOT EXISTS notices_subject ON notices (subject_key, detector, test_mode);
CREATE TABLE IF NOT EXISTS messages (
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
);
CREATE INDEX IF NOT EXISTS messages_state ON messages (state, next_try_ts);
CREATE TABLE IF NOT EXISTS message_notices (
    key TEXT NOT NULL REFERENCES messages (key),   -- one message (a person's digest) ...
    notice_id INTEGER NOT NULL REFERENCES notices (id),  -- ... tells of these notices ...
    role TEXT NOT NULL,                            -- ... each in this role (owner, manager)
    PRIMARY KEY (key, notice_id)
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL REFERENCES messages (key),
    ts TEXT NOT NULL,
    outcome TEXT NOT NULL,       -- sending | delivered | retry | deferred | failed | requeued
    detail TEXT
);
CREATE TABLE IF NOT EXISTS actions (
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
);
""",
    "dcgm_exporter.sqlite": (
        "CREATE TABLE IF NOT EXISTS event_latch (cluster TEXT NOT NULL, gpu_uuid TEXT NOT "
        "NULL, kind TEXT NOT NULL, code INTEGER, PRIMARY KEY (cluster, gpu_uuid, kind))"
    ),
    "nvml_events.sqlite": (
        "CREATE TABLE IF NOT EXISTS event_latch (cluster TEXT NOT NULL, gpu_uuid TEXT NOT "
        "NULL, kind TEXT NOT NULL, code INTEGER, PRIMARY KEY (cluster, gpu_uuid, kind))"
    ),
    "attribution.sqlite": ";\n".join(
        [
            # warehouse/partitions.py
            "CREATE TABLE IF NOT EXISTS sample_days_built ("
            " cluster TEXT, date TEXT, own TEXT, next TEXT, PRIMARY KEY (cluster, date))",
            # warehouse/attribution.py's owner check (gone in version 2)
            "CREATE TABLE IF NOT EXISTS checked_files ("
            " path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, allocations TEXT)",
            # warehouse/summary/state.py
            "CREATE TABLE IF NOT EXISTS summary_built (inputs TEXT, marts TEXT, index_fp TEXT)",
            "CREATE TABLE IF NOT EXISTS summary_days ("
            " cluster TEXT, date TEXT, digest TEXT, PRIMARY KEY (cluster, date))",
            "CREATE TABLE IF NOT EXISTS summary_records (path TEXT PRIMARY KEY, stamp TEXT)",
            "CREATE TABLE IF NOT EXISTS summary_record_jobs (path TEXT, cluster TEXT, job_id TEXT)",
        ]
    ),
    "compaction.sqlite": (
        "CREATE TABLE IF NOT EXISTS reader_merges ("
        " reader TEXT, tbl TEXT, cluster TEXT, date TEXT, before BLOB, after TEXT,"
        " PRIMARY KEY (reader, tbl, cluster, date))"
    ),
}
# compaction.sqlite before compaction_log.READERS: one entry for all readers (dropped on open)
OLDER_COMPACTION = (
    "CREATE TABLE IF NOT EXISTS merges ("
    " tbl TEXT, cluster TEXT, date TEXT, before BLOB, after TEXT,"
    " PRIMARY KEY (tbl, cluster, date))"
)

# A row in each file's first table, to check it survives the upgrade: (table, values).
ROWS: dict[str, tuple[str, tuple[object, ...]]] = {
    "prometheus.sqlite": ("checkpoints", ("c", "s", "up", "http://p", 60, 1000, 2000)),
    "slurm.sqlite": ("checkpoint", ("c", 1000, 2000)),
    "kubernetes.sqlite": ("checkpoint", ("c", 1000)),
    "dcgm_exporter.sqlite": ("event_latch", ("c", "GPU-1", "xid", 13)),
    "nvml_events.sqlite": ("event_latch", ("c", "GPU-1", "xid", 79)),
    "attribution.sqlite": ("sample_days_built", ("c", "2026-01-01", "own", "next")),
    "compaction.sqlite": ("reader_merges", ("summary", "jobs", "c", "2026-01-01", b"x", "y")),
    "alerts.sqlite": (
        "attempts",
        (1, "key-1", "2026-01-01T00:00:00.000+00:00", "delivered", None),
    ),
}
BY_NAME = {spec.name: spec for spec in STATE_FILES}


def shape(con: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """Every table and index of a database as SQLite stores it: (type, name, normalised SQL)."""
    rows = con.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    )
    return [(kind, name, " ".join((sql or "").split())) for kind, name, sql in rows]


def fresh_shape(spec: StateFile, tmp_path: Path) -> list[tuple[str, str, str]]:
    path = tmp_path / f"fresh-{spec.name}"
    con = open_state(path, spec)
    try:
        return shape(con)
    finally:
        con.close()


def user_version(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def make_old(path: Path, sql: str, row: tuple[str, tuple[object, ...]] | None) -> None:
    """A state file as the code before versions left it (user_version 0), holding `row`."""
    con = sqlite3.connect(path)
    try:
        con.executescript(sql)
        if row is not None:
            table, values = row
            marks = ",".join("?" * len(values))
            con.execute(f"INSERT INTO {table} VALUES ({marks})", values)  # test's own names
        con.commit()
    finally:
        con.close()


def test_the_registry_names_each_file_once_with_its_fixtures() -> None:
    assert len(BY_NAME) == len(STATE_FILES)
    assert set(BY_NAME) == set(OLD_SCHEMAS) == set(ROWS)
    assert {s.location for s in STATE_FILES} == set(Location)
    for spec in STATE_FILES:
        assert spec.name.endswith(".sqlite") and spec.version >= 1 and spec.holds
        assert all(s.lstrip().upper().startswith(("CREATE ", "DROP ")) for s in spec.schema)


@pytest.mark.parametrize("spec", STATE_FILES, ids=lambda s: s.name)
def test_a_file_from_before_versions_opens_stamped_with_its_rows(
    spec: StateFile, tmp_path: Path
) -> None:
    path = tmp_path / spec.name
    make_old(path, OLD_SCHEMAS[spec.name], ROWS[spec.name])
    assert user_version(path) == 0

    con = open_state(path, spec)
    try:
        table, values = ROWS[spec.name]
        assert con.execute(f"SELECT * FROM {table}").fetchall() == [values]
        assert shape(con) == fresh_shape(spec, tmp_path)
    finally:
        con.close()
    assert user_version(path) == spec.version
    assert stat.S_IMODE(path.stat().st_mode) in (0o644, 0o660)  # made by sqlite3 here: as it was


@pytest.mark.parametrize("spec", STATE_FILES, ids=lambda s: s.name)
def test_the_migrations_from_an_empty_file_end_in_the_schema(
    spec: StateFile, tmp_path: Path
) -> None:
    con = sqlite3.connect(tmp_path / "migrated.sqlite")
    try:
        for version in range(1, spec.version + 1):
            for statement in spec.migrations[version]:
                con.execute(statement)
        assert shape(con) == fresh_shape(spec, tmp_path)
    finally:
        con.close()


def test_a_partial_file_gets_what_is_missing(tmp_path: Path) -> None:
    """attribution.sqlite as one module left it (the others' tables not made yet)."""
    path = tmp_path / "attribution.sqlite"
    make_old(path, OLD_SCHEMAS[path.name].split(";")[0], ROWS[path.name])
    with open_state(path, state_files.ATTRIBUTION) as con:
        assert shape(con) == fresh_shape(state_files.ATTRIBUTION, tmp_path)
        assert con.execute("SELECT count(*) FROM sample_days_built").fetchone() == (1,)


def test_version_2_drops_what_only_the_rewriting_of_sample_files_kept(tmp_path: Path) -> None:
    """The owner check's checked files (attribution) and its merge entries (compaction) go;
    the per-day pass's record and the other readers' entries stay."""
    attribution = tmp_path / "attribution.sqlite"
    make_old(attribution, OLD_SCHEMAS[attribution.name], ROWS[attribution.name])
    with sqlite3.connect(attribution) as con:
        con.execute("INSERT INTO checked_files VALUES ('/lake/a.parquet', 10, 20, 'fp')")
        con.execute("PRAGMA user_version = 1")
    compaction = tmp_path / "compaction.sqlite"
    make_old(compaction, OLD_SCHEMAS[compaction.name], ROWS[compaction.name])
    with sqlite3.connect(compaction) as con:
        con.execute(
            "INSERT INTO reader_merges VALUES "
            "('owner_check', 'job_gpus', 'c', '2026-01-01', x'00', 'y')"
        )
        con.execute("PRAGMA user_version = 1")

    with open_state(attribution, state_files.ATTRIBUTION) as con:
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "checked_files" not in tables
        assert con.execute("SELECT count(*) FROM sample_days_built").fetchone() == (1,)
    with open_state(compaction, state_files.COMPACTION) as con:
        assert con.execute("SELECT reader FROM reader_merges").fetchall() == [("summary",)]
    assert user_version(attribution) == state_files.ATTRIBUTION.version
    assert user_version(compaction) == state_files.COMPACTION.version


def test_the_compaction_log_from_before_readers_loses_its_old_table(tmp_path: Path) -> None:
    path = tmp_path / "compaction.sqlite"
    make_old(path, OLDER_COMPACTION, ("merges", ("jobs", "c", "2026-01-01", b"x", "y")))
    with open_state(path, state_files.COMPACTION) as con:
        assert shape(con) == fresh_shape(state_files.COMPACTION, tmp_path)
    assert user_version(path) == state_files.COMPACTION.version


def test_a_new_file_in_a_lake_is_shared_and_stamped(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    os.umask(0o077)
    try:
        con = open_state(lake, state_files.SLURM)
    finally:
        os.umask(0o022)
    con.close()
    path = lake / "_state" / "slurm.sqlite"
    assert oct(stat.S_IMODE(path.stat().st_mode)) == oct(layout.SHARED_FILE_MODE)
    assert user_version(path) == state_files.SLURM.version


def test_a_spool_file_lives_in_the_spool_state_folder(tmp_path: Path) -> None:
    open_state(tmp_path / "spool", state_files.NVML_EVENTS).close()
    folder = tmp_path / "spool" / "_state"
    assert [p.name for p in folder.iterdir()] == ["nvml_events.sqlite"]
    assert oct(stat.S_IMODE(folder.stat().st_mode)) == oct(layout.PRIVATE_DIR_MODE)


def test_the_permission_checks_stay(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.sqlite").touch()
    link = tmp_path / "alerts.sqlite"
    link.symlink_to(tmp_path / "elsewhere.sqlite")
    with pytest.raises(NotWritable):
        open_state(link, state_files.ALERTS)
    damaged = tmp_path / "slurm.sqlite"
    damaged.write_text("not a database\n")
    with pytest.raises(DamagedFile):
        open_state(damaged, state_files.SLURM)


def test_a_file_from_a_newer_gpuledger_is_refused_in_one_line(tmp_path: Path) -> None:
    spec = state_files.PROMETHEUS
    path = tmp_path / spec.name
    make_old(path, OLD_SCHEMAS[spec.name], ROWS[spec.name])
    with sqlite3.connect(path) as con:
        con.execute(f"PRAGMA user_version = {spec.version + 1}")
    with pytest.raises(StateFileTooNew, match="newer gpuledger"):
        open_state(path, spec)
    assert user_version(path) == spec.version + 1  # left as it was

    @click.command()
    @reports_errors
    def opens() -> None:
        open_state(path, spec).close()

    result = CliRunner().invoke(opens, [])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "newer gpuledger" in lines[0]


def test_the_callers_mode_is_kept(tmp_path: Path) -> None:
    for autocommit in (False, True):
        path = tmp_path / f"{autocommit}.sqlite"
        con = open_state(path, state_files.COMPACTION, autocommit=autocommit)
        assert con.isolation_level == (None if autocommit else "")
        assert not con.in_transaction
        con.close()


# ---------------------------------------------------------------- two processes at once

# version 2 of a test file: its migration fails if it runs twice (the column exists)
_COUNTED_V1 = ("CREATE TABLE IF NOT EXISTS t (a INTEGER)",)
COUNTED_V2 = StateFile(
    name="counted.sqlite",
    holds="a test file",
    location=Location.LAKE,
    version=2,
    schema=("CREATE TABLE IF NOT EXISTS t (a INTEGER, b INTEGER)",),
    migrations={
        1: _COUNTED_V1,
        2: ("ALTER TABLE t ADD COLUMN b INTEGER", "INSERT INTO t (a) VALUES (2)"),
    },
)


def _open_at_once(path: str, spec_name: str, barrier: object, out: object) -> None:
    spec = COUNTED_V2 if spec_name == COUNTED_V2.name else BY_NAME[spec_name]
    barrier.wait()  # type: ignore[attr-defined]
    try:
        open_state(Path(path), spec, timeout_s=30.0).close()
        out.put("ok")  # type: ignore[attr-defined]
    except Exception as exc:  # reported to the parent, which fails the test
        out.put(repr(exc))  # type: ignore[attr-defined]


def _race(path: Path, spec_name: str, n: int = 4) -> list[str]:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(target=_open_at_once, args=(str(path), spec_name, barrier, out))
        for _ in range(n)
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    return results


def test_processes_opening_a_new_file_at_once_make_one_schema(tmp_path: Path) -> None:
    spec = state_files.ALERTS
    path = tmp_path / spec.name
    assert _race(path, spec.name) == ["ok"] * 4
    assert user_version(path) == spec.version
    with sqlite3.connect(path) as con:
        assert shape(con) == fresh_shape(spec, tmp_path)


def test_processes_opening_an_old_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / COUNTED_V2.name
    make_old(path, _COUNTED_V1[0], ("t", (1,)))
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA user_version = 1")
    assert _race(path, COUNTED_V2.name) == ["ok"] * 4
    assert user_version(path) == 2
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT a, b FROM t ORDER BY a").fetchall() == [(1, None), (2, None)]


# ---------------------------------------------------------------- the registry is complete


def test_every_state_file_the_code_names_is_registered() -> None:
    named = set()
    for package in ("app", "collector", "detectors", "warehouse", "sql"):
        for source in (REPO / package).rglob("*.py"):
            named |= set(re.findall(r"[A-Za-z0-9_-]+\.sqlite\b", source.read_text()))
    assert named == set(BY_NAME)


@pytest.mark.slow
def test_a_demo_lake_holds_only_registered_state_files(tmp_path: Path) -> None:
    from app.cli import cli

    lake = tmp_path / "lake"
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    result = runner.invoke(
        cli, ["demo", "--lake", str(lake), "--no-dashboard", "--gpus", "16", "--days", "1"]
    )
    assert result.exit_code == 0, result.output
    found = sorted(p.name for p in (lake / "_state").rglob("*.sqlite"))
    assert "attribution.sqlite" in found
    assert set(found) <= set(BY_NAME)
    for name in found:
        assert user_version(lake / "_state" / name) == BY_NAME[name].version


def test_the_design_lists_every_state_file_with_its_version() -> None:
    text = (REPO / "docs" / "design.md").read_text()
    section = text.split("### 3.7 State files", 1)[1].split("\n## ", 1)[0]
    listed = {
        name: int(version)
        for name, version in re.findall(r"^\| `([\w-]+\.sqlite)` \|[^|]+\| (\d+) \|", section, re.M)
    }
    assert listed == {spec.name: spec.version for spec in STATE_FILES}


def test_a_collector_waiting_on_a_migration_names_the_other_run(tmp_path: Path) -> None:
    from collector.errors import CollectorError
    from collector.state import state_transaction

    lake = tmp_path / "lake"
    path = layout.state_dir(lake) / state_files.SLURM.name
    make_old(path, OLD_SCHEMAS[path.name], ROWS[path.name])  # to migrate: needs the lock
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another collector's run
    try:
        with (
            pytest.raises(CollectorError, match="another `gpuledger collect slurm` running"),
            state_transaction(lake, state_files.SLURM, "gpuledger collect slurm", 0.1),
        ):
            pass
    finally:
        other.execute("ROLLBACK")
        other.close()
    with state_transaction(lake, state_files.SLURM, "gpuledger collect slurm") as con:
        assert con.execute("SELECT * FROM checkpoint").fetchall() == [ROWS[path.name][1]]
    assert user_version(path) == state_files.SLURM.version
