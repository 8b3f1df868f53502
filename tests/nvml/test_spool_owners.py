"""Throughput files from ordinary users (#22 LOW 13): a user reports only for the jobs the lake
says they own, a file must be owned by the writer its name claims, and batch names cannot be
guessed to replace another user's rows.

Real files with real owners: under root the files are chowned to `nobody` (and `daemon`, a
second ordinary user); under any other user, the test's own user stands in for the ordinary
one (nobody is trusted then) and the two-user cases are skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pwd
import re
from pathlib import Path

import pyarrow as pa
import pytest

from collector.sources.spool import Spool
from collector.throughput import ThroughputReporter, claimed_uid
from warehouse.lake import Lake
from warehouse.schema import RAW_TABLES
from warehouse.writer import write_batch

ROOT = os.geteuid() == 0
ORDINARY = pwd.getpwnam("nobody") if ROOT else pwd.getpwuid(os.geteuid())
SECOND = pwd.getpwnam("daemon") if ROOT else None
TRUSTED: frozenset[int] | None = None if ROOT else frozenset()  # nobody trusted when not root
T0 = dt.datetime(2026, 3, 2, 12, 0, tzinfo=dt.UTC)
TS_MS = int(T0.timestamp() * 1000)


def land_jobs(lake: Path, owners: dict[str, str]) -> None:
    schema = RAW_TABLES["jobs"].schema
    rows = [
        {"cluster": "della", "job_id": job, "user": user, "state": "RUNNING",
         "source": "test", "updated_ts": T0}
        for job, user in owners.items()
    ]  # fmt: skip
    names = [f.name for f in schema if f.name in rows[0]]
    table = pa.Table.from_pylist(rows, schema=pa.schema([schema.field(n) for n in names]))
    write_batch(lake, "jobs", table, "jobs-1")


def drop(inbox: Path, name: str, jobs: list[str], owner: pwd.struct_passwd, samples: int = 64):
    path = inbox / name
    lines = [
        json.dumps({"job_id": j, "ts_ms": TS_MS, "samples_total": samples, "source": "app"})
        for j in jobs
    ]
    path.write_text("\n".join(lines) + "\n")
    os.chown(path, owner.pw_uid, owner.pw_gid)
    return path


def throughput(lake: Path) -> list[tuple[str, float]]:
    from warehouse.connection import connect

    if not (lake / "app_throughput").is_dir():
        return []
    with connect(lake) as con:
        return con.sql(
            "SELECT job_id, samples_total FROM app_throughput ORDER BY job_id"
        ).fetchall()


@pytest.fixture
def spool_and_lake(tmp_path):
    lake = tmp_path / "lake"
    land_jobs(lake, {"100": ORDINARY.pw_name, "200": "alice"})
    spool = Spool(tmp_path / "spool")
    return spool, spool.open_inbox(), lake


def test_a_user_lands_throughput_only_for_their_own_jobs(spool_and_lake):
    spool, inbox, lake = spool_and_lake
    drop(inbox, f"u{ORDINARY.pw_uid}-n1.7.1.1.{'a' * 32}.jsonl", ["100", "200", "300"], ORDINARY)

    result = spool.land(Lake.at(lake), "della", trusted_uids=TRUSTED)

    assert (result.files, result.rejected, result.refused_rows) == (1, 0, 2)
    assert throughput(lake) == [("100", 64.0)]  # not alice's 200, not the unknown 300
    assert list(inbox.iterdir()) == []


def test_a_file_whose_owner_is_not_the_claimed_writer_is_refused(spool_and_lake):
    spool, inbox, lake = spool_and_lake
    claims_root = drop(inbox, f"u0-n1.7.1.1.{'b' * 32}.jsonl", ["100"], ORDINARY)
    unclaimed = drop(inbox, "n1.7.1.2.jsonl", ["100"], ORDINARY)

    result = spool.land(Lake.at(lake), "della", trusted_uids=TRUSTED)

    assert (result.files, result.rejected) == (0, 2)
    assert throughput(lake) == []
    rejected = spool.root / "_rejected" / "app_throughput"
    assert sorted(p.name for p in rejected.iterdir()) == sorted([claims_root.name, unclaimed.name])


@pytest.mark.skipif(not ROOT, reason="needs root to own files as two other users")
def test_another_user_cannot_replace_rows_by_reusing_a_batch_name(spool_and_lake):
    spool, inbox, lake = spool_and_lake
    assert SECOND is not None
    name = f"u{ORDINARY.pw_uid}-n1.7.1.1.{'c' * 32}.jsonl"
    drop(inbox, name, ["100"], ORDINARY, samples=64)
    assert spool.land(Lake.at(lake), "della").files == 1
    # the agent deleted the file; another user drops one under the very same name
    drop(inbox, name, ["100"], SECOND, samples=0)

    result = spool.land(Lake.at(lake), "della")

    assert (result.files, result.rejected) == (0, 1)
    assert throughput(lake) == [("100", 64.0)]  # the first user's rows stand


def test_root_and_the_agent_may_report_for_any_job(spool_and_lake):
    spool, inbox, lake = spool_and_lake
    me = pwd.getpwuid(os.geteuid())
    drop(inbox, "n1.7.1.1.jsonl", ["200", "300"], me)  # trusted: no claim needed
    result = spool.land(Lake.at(lake), "della", trusted_uids=frozenset({os.geteuid()}))
    assert (result.files, result.refused_rows) == (1, 0)
    assert [job for job, _ in throughput(lake)] == ["200", "300"]


def test_the_reporter_names_each_file_for_its_writer_and_unguessably(tmp_path):
    spool = Spool(tmp_path / "spool")
    spool.open_inbox()

    def flushed() -> Path:
        # the same node, reporter, time and sequence each time: only the random part differs
        reporter = ThroughputReporter("100", spool=spool.root, node="n1", reporter="7",
                                      clock=lambda: 1.0)  # fmt: skip
        reporter.report(samples=1)
        path = reporter.flush()
        assert path is not None
        return path

    first, second = flushed(), flushed()
    for path in (first, second):
        assert claimed_uid(path.name) == os.getuid()
        assert path.stat().st_uid == os.getuid()
        assert re.fullmatch(rf"u{os.getuid()}-n1\.7\.1000\.1\.[0-9a-f]{{32}}\.jsonl", path.name)
    assert first.name != second.name
    result = spool.land(
        Lake.at(tmp_path / "lake"), "della", trusted_uids=frozenset({0, os.geteuid()})
    )
    assert result.files == 2
