"""A lake written by two users (the service, and a node agent running as root): a folder this
user cannot read is an error naming it, not files silently missing from every query; and, run
as root, the real thing: samples landed by root are re-attributed (their files rewritten) by
another user sharing only the lake's group, with no row lost or duplicated."""

from __future__ import annotations

import datetime as dt
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.infra.permissions import world_accessible
from warehouse import layout
from warehouse.connection import connect
from warehouse.errors import NotReadable

OTHER_UID = 65534  # nobody
# Another user's view needs a second user: only root can become one (a non-root user owns every
# file it makes, so it can always read them). `make check` runs as any user; these skip there.
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: acts as another user (lands as root, rewrites as nobody)"
)


def as_other_user(action: Callable[[], object]) -> str:
    """Run `action` as an unprivileged user; return the NotReadable message it raised, or ''.

    As root (permissions do not stop root) in a forked child that drops to `nobody`.
    """
    if os.geteuid() != 0:
        try:
            action()
        except NotReadable as exc:
            return str(exc)
        return ""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            action()
        except NotReadable as exc:
            os.write(write, str(exc).encode())
        except BaseException as exc:  # noqa: BLE001 (reported through the exit status)
            os.write(write, f"unexpected {type(exc).__name__}: {exc}".encode())
            code = 2
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, message
    return message


@pytest.fixture
def lake() -> Iterator[Path]:
    # outside pytest's tmp_path (0700 folders of the user running the tests), and outside the
    # caller's TMPDIR, which may be private too (make test's RAM-disk folder is 0700): in /tmp,
    # which every user may pass through
    with tempfile.TemporaryDirectory(prefix="gpuledger-perm-", dir="/tmp") as top:
        os.chmod(top, 0o755)
        yield Path(top) / "lake"


def a_file(lake: Path, date: str) -> Path:
    """One committed Parquet file of `jobs` (listing is what is tested, not its rows)."""
    folder = lake / "jobs" / "cluster=c" / f"date={date}"
    folder.mkdir(parents=True)
    path = folder / "batch.parquet"
    pq.write_table(pa.table({"job_id": ["1"]}), path)
    return path


@as_root
def test_a_folder_of_another_user_is_an_error_naming_it(lake):
    path = a_file(lake, "2026-11-02")
    for folder in [lake, *[p for p in lake.rglob("*") if p.is_dir()]]:
        os.chmod(folder, 0o755)
    os.chmod(path.parent, 0o700)  # written by another user, not readable by this one
    readable_first = layout.table_files(lake, "jobs")  # its owner sees the file
    assert readable_first == [path]
    message = as_other_user(lambda: layout.table_files(lake, "jobs"))
    assert message.startswith(f"cannot read {str(path.parent)!r} (Permission denied)")


def test_a_readable_lake_lists_every_file_for_another_user_too(lake):
    path = a_file(lake, "2026-11-02")
    for folder in [lake, *[p for p in lake.rglob("*") if p.is_dir()]]:
        os.chmod(folder, 0o755)
    os.chmod(path, 0o644)
    assert as_other_user(lambda: _expect(layout.table_files(lake, "jobs"), [path])) == ""


@as_root
def test_a_lake_this_user_may_not_enter_is_an_error_too(lake):
    a_file(lake, "2026-11-02")
    os.chmod(lake, 0o700)
    message = as_other_user(lambda: layout.table_files(lake, "jobs"))
    assert message.startswith("cannot read ") and "Permission denied" in message


def _expect(got: list[Path], want: list[Path]) -> None:
    if got != want:
        raise AssertionError(f"{got} != {want}")


# ---------------------------------------------------------------- one lake, two writers
#
# The deployment (docs/operations/deploy.md, "On a Slurm cluster"): node agents run as root
# with Group=gpuledger and land samples; the service (gpuledger:gpuledger) later rewrites those
# files when scheduler records arrive late. Here `nobody` plays the service and `nogroup` (its
# own group) plays `gpuledger`. Every process runs under the units' UMask=0027.

SHARED_GID = 65534  # nogroup
SAMPLE_TIMES = range(0, 600, 30)  # 20 samples of one GPU, one every 30 s
JOB_END = 300  # the late allocation covers the first 10


def in_child(uid: int, gid: int, action: Callable[[], object]) -> None:
    """Run `action` in a forked child as `uid`:`gid` (no other groups, umask 0027); fail the
    test with what it raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.umask(0o027)
            action()
        except BaseException as exc:  # noqa: BLE001 (reported through the pipe)
            os.write(write, f"as {uid}:{gid}: {type(exc).__name__}: {exc}".encode())
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, message


def gpuledger(*args: str) -> None:
    """Run the real CLI in this process; raise with its output unless it exits 0."""
    from click.testing import CliRunner

    from app.cli import cli

    result = CliRunner().invoke(cli, list(args))
    if result.exit_code != 0:
        raise RuntimeError(
            f"gpuledger {' '.join(args)} exited {result.exit_code}: {result.output}"
            f"{result.stderr} {result.exception!r}"
        )


def agent_lands_samples(lake: Path) -> Callable[[], object]:
    from tests.marts import rows as r

    def run() -> None:  # two ticks of the NVML agent, before the scheduler told whose job it was
        half = len(SAMPLE_TIMES) // 2
        r.land(lake, "gpu_samples", r.samples(SAMPLE_TIMES[:half]), "agent-g001-1")
        r.land(lake, "gpu_samples", r.samples(SAMPLE_TIMES[half:]), "agent-g001-2")

    return run


def service_attributes_a_late_job(lake: Path) -> Callable[[], object]:
    from tests.marts import rows as r

    def run() -> None:
        r.land(lake, "jobs", [r.job("j1", 0, JOB_END)], "slurm")
        r.land(lake, "job_gpus", [r.job_gpu("j1", 0, JOB_END)], "slurm")
        gpuledger("attribute", "--lake", str(lake), "--quiet")

    return run


def sample_owners(lake: Path) -> dict[str | None, int]:
    """Samples per owning job (None: no job), as the derived data (gpu_job_buckets) holds them:
    every sample once, its owner decided there (the raw files keep their source's job_id)."""
    con = connect(lake)
    try:
        rows = con.sql("SELECT job_id, sum(samples) FROM gpu_job_buckets GROUP BY job_id")
        return {job: int(n) for job, n in rows.fetchall()}
    finally:
        con.close()


OWNED = {"j1": sum(1 for t in SAMPLE_TIMES if t < JOB_END), None: 10}  # by the late allocation


@pytest.fixture(scope="module")
def warm() -> None:
    """Run the scenario once in this process first: a child as `nobody` cannot read the
    interpreter's own library when it lies under /root, so what it imports lazily (importlib
    readers, SQL files' loaders…) must be imported before it forks."""
    with tempfile.TemporaryDirectory(prefix="gpuledger-perm-warm-") as top:
        agent_lands_samples(Path(top))()
        service_attributes_a_late_job(Path(top))()


@as_root
@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent_gid", "service_first"),
    [
        (SHARED_GID, False),  # Group=gpuledger, the agent makes the lake
        (0, True),  # the agent in root's own group, in a lake the service made
    ],
    ids=["agent-group-shared", "agent-group-root"],
)
def test_the_service_attributes_samples_the_root_agent_landed_without_rewriting_them(
    warm, lake, agent_gid, service_first
):
    if service_first:  # the Deployment page's `install -d -o gpuledger -g gpuledger -m 2770 <lake>`
        lake.mkdir()
        os.chown(lake, OTHER_UID, SHARED_GID)
        os.chmod(lake, 0o2770)
        in_child(OTHER_UID, SHARED_GID, lambda: layout.state_dir(lake))
    in_child(0, agent_gid, agent_lands_samples(lake))
    landed = layout.table_files(lake, "gpu_samples")
    assert len(landed) == 2
    assert {(p.stat().st_uid, p.stat().st_gid) for p in landed} == {(0, SHARED_GID)}  # lake's
    written = {p: p.read_bytes() for p in landed}

    in_child(OTHER_UID, SHARED_GID, service_attributes_a_late_job(lake))

    # the agent's files are as it wrote them (raw files are never rewritten) ...
    assert {p: p.read_bytes() for p in layout.table_files(lake, "gpu_samples")} == written
    assert {p.stat().st_uid for p in landed} == {0}
    # ... and the service's derived data gives the samples inside the late allocation its job
    assert sample_owners(lake) == OWNED
    assert {p.stat().st_uid for p in layout.table_files(lake, "gpu_job_buckets")} == {OTHER_UID}
    entries = [lake, *lake.rglob("*")]
    folders = {oct(stat.S_IMODE(p.stat().st_mode)) for p in entries if p.is_dir()}
    assert folders == {"0o2770"}  # group-writable and setgid, the folders the service made too
    assert {p.stat().st_gid for p in entries} == {SHARED_GID}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in lake.rglob("*.parquet")} == {"0o640"}
    assert world_accessible(lake) == []


@as_root
@pytest.mark.slow
def test_state_an_operator_made_as_root_is_still_the_services(warm, lake):
    """`sudo gpuledger attribute` by hand, then the service: the SQLite state root created (and
    the folders) must stay writable by the service."""
    in_child(0, SHARED_GID, agent_lands_samples(lake))
    in_child(0, 0, lambda: gpuledger("attribute", "--lake", str(lake), "--quiet"))
    state = lake / "_state" / "attribution.sqlite"
    assert (state.stat().st_uid, state.stat().st_gid) == (0, SHARED_GID)

    in_child(OTHER_UID, SHARED_GID, service_attributes_a_late_job(lake))

    assert sample_owners(lake) == OWNED
    assert world_accessible(lake) == []


@as_root
def test_a_file_this_user_may_not_read_is_not_called_damaged(lake):
    # a node agent's file made 0640 root:root before the lake was given its group: the service
    # is told it may not read it, not to move a "damaged" file out of the lake
    from warehouse.connection import _damaged
    from warehouse.damage import _unreadable

    path = a_file(lake, "2026-11-02")
    for folder in [lake, *[p for p in lake.rglob("*") if p.is_dir()]]:
        os.chmod(folder, 0o755)
    os.chmod(path, 0o600)
    # as root first: a child as `nobody` cannot import from this interpreter's folders
    assert not _unreadable(str(path))
    assert isinstance(_damaged([path], RuntimeError("x")), RuntimeError)

    def check() -> None:
        assert not _unreadable(str(path))
        raise _damaged([path], RuntimeError("DuckDB could not open it"))

    message = as_other_user(check)
    assert message.startswith(f"cannot read {str(path)!r}"), message
    assert "Permission denied" in message


@as_root
def test_an_alert_ledger_root_made_is_still_the_services(lake):
    """`sudo gpuledger alert` by hand, killed before it closed the ledger, then the service:
    the ledger root created, and the -wal and -shm files it left, must stay the service's."""
    from app.alerts.ledger import LEDGER_FILE, Ledger

    at = dt.datetime(2026, 11, 4, 10, 0, tzinfo=dt.UTC)
    lake.mkdir()  # the Deployment page's `install -d -o gpuledger -g gpuledger -m 2770 <lake>`
    os.chown(lake, OTHER_UID, SHARED_GID)
    os.chmod(lake, 0o2770)
    path = lake / "_state" / LEDGER_FILE

    def operator() -> None:  # leaves without closing: the child exits as if killed
        ledger = Ledger.open(layout.state_dir(lake) / LEDGER_FILE)
        ledger.add_message(
            key="k1",
            notice_id=None,
            kind="notice",
            role="owner",
            channel="slack",
            recipient="U1",
            payload={},
            now=at,
        )

    def service() -> None:
        ledger = Ledger.open(path)
        if [m.key for m in ledger.due(at)] != ["k1"]:
            raise AssertionError(f"the operator's message is not due: {ledger.due(at)}")
        ledger.mark_sending("k1", at)
        ledger.mark_delivered("k1", at)
        ledger.close()

    in_child(0, 0, operator)
    files = sorted(p for p in path.parent.iterdir() if p.name.startswith(LEDGER_FILE))
    assert [p.name for p in files] == [LEDGER_FILE, f"{LEDGER_FILE}-shm", f"{LEDGER_FILE}-wal"]
    assert {(p.stat().st_uid, p.stat().st_gid) for p in files} == {(0, SHARED_GID)}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {"0o660"}

    in_child(OTHER_UID, SHARED_GID, service)

    ledger = Ledger.open(path)
    assert ledger.counts() == {"delivered": 1}
    ledger.close()
    assert world_accessible(lake) == []
