"""A lake written by two users (the service, and a node agent running as root): a folder this
user cannot read is an error naming it, not files silently missing from every query."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse import layout
from warehouse.errors import NotReadable

OTHER_UID = 65534  # nobody


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
    # outside pytest's tmp_path (0700 folders of the user running the tests)
    with tempfile.TemporaryDirectory(prefix="gpuledger-perm-") as top:
        os.chmod(top, 0o755)
        yield Path(top) / "lake"


def a_file(lake: Path, date: str) -> Path:
    """One committed Parquet file of `jobs` (listing is what is tested, not its rows)."""
    folder = lake / "jobs" / "cluster=c" / f"date={date}"
    folder.mkdir(parents=True)
    path = folder / "batch.parquet"
    pq.write_table(pa.table({"job_id": ["1"]}), path)
    return path


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


def test_a_lake_this_user_may_not_enter_is_an_error_too(lake):
    a_file(lake, "2026-11-02")
    os.chmod(lake, 0o700)
    message = as_other_user(lambda: layout.table_files(lake, "jobs"))
    assert message.startswith("cannot read ") and "Permission denied" in message


def _expect(got: list[Path], want: list[Path]) -> None:
    if got != want:
        raise AssertionError(f"{got} != {want}")
