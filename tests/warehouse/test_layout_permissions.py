"""The lake's modes (warehouse.layout): one group shares it, nobody else gets anything.

Folders 2770 (group-writable, setgid), files replaced by rename 0640, files updated in place
0660, whatever the umask; a mode is set only on what this process creates. The two-user runs
(root agent, service user) are in tests/deploy/test_lake_permissions.py.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from warehouse import layout, writer
from warehouse.errors import NotWritable


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(params=[0o000, 0o077], ids=["umask-000", "umask-077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run the test under a permissive and a strict umask: the modes must not depend on it."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_every_folder_made_is_group_writable_and_setgid(lake, make_samples, t0, umask):
    writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")
    layout.state_dir(lake)

    folders = [lake, *(p for p in lake.rglob("*") if p.is_dir())]
    assert len(folders) == 7  # lake, table, cluster=, date=, _state, _state/locks, /clusters
    assert {oct(mode(p)) for p in folders} == {"0o2770"}
    assert {p.stat().st_gid for p in lake.rglob("*")} == {lake.stat().st_gid}


def test_landed_files_are_group_readable_only(lake, make_samples, t0, umask):
    [path] = writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")
    assert oct(mode(path)) == "0o640"
    assert [p.name for p in path.parent.iterdir()] == ["w1.parquet"]  # no temporary file left


def test_a_new_state_db_is_group_writable(lake, umask):
    with layout.open_state_db(lake, "attribution.sqlite") as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    assert oct(mode(lake / "_state" / "attribution.sqlite")) == "0o660"


def test_an_existing_file_keeps_its_mode(lake):
    """Another member may own it (chmod would fail): it is opened as it is."""
    layout.state_dir(lake)
    path = lake / "_state" / "alerts.lock"
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    os.close(layout.open_shared_file(path, os.O_WRONLY | os.O_APPEND))
    assert oct(mode(path)) == "0o600"


def test_a_link_in_place_of_a_state_file_is_refused(lake, tmp_path):
    """The folders are the whole group's: a link there must not redirect a write elsewhere."""
    layout.state_dir(lake)
    elsewhere = tmp_path / "elsewhere"
    (lake / "_state" / "alerts.lock").symlink_to(elsewhere)
    with pytest.raises(OSError):
        layout.open_shared_file(lake / "_state" / "alerts.lock", os.O_WRONLY)
    assert not elsewhere.exists()


def test_a_state_db_that_cannot_be_opened_is_one_error_naming_it(lake):
    (lake / "_state" / "attribution.sqlite").mkdir(parents=True)  # a folder in its place
    with pytest.raises(NotWritable, match=r"cannot open the state file '.*attribution\.sqlite'"):
        layout.open_state_db(lake, "attribution.sqlite")


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to the user nobody")
def test_another_users_owner_only_state_file_says_how_to_share_it(lake):
    """A ledger root made 0600 with an earlier version, opened by the service user."""
    path = lake / "_state" / "alerts.sqlite"
    path.parent.mkdir(parents=True)
    path.touch()
    os.chmod(path, 0o600)
    os.chmod(path.parent, 0o777)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)  # nobody
            layout.open_private_db(path)
        except NotWritable as exc:
            code = 0 if "chmod 660" in str(exc) and "chgrp" in str(exc) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_temporary_files_are_new_private_and_never_a_name_left_there(lake, umask):
    target = layout.ensure_dir(lake / "t") / "x.parquet"
    fd1, tmp1 = layout.create_temp(target)
    fd2, tmp2 = layout.create_temp(target)
    os.close(fd1)
    os.close(fd2)
    assert tmp1 != tmp2 and tmp1.parent == target.parent and tmp1.name.startswith(".x.parquet.")
    assert oct(mode(tmp1)) == "0o640"  # before a byte is written


def test_a_table_lock_file_is_group_writable(lake, make_samples, t0, umask):
    # the root node agent and the service user both land batches: both take the table's lock
    writer.write_batch(lake, "gpu_samples", make_samples([t0]), "w1")
    assert oct(mode(lake / "_state" / "locks" / "gpu_samples.lock")) == "0o660"
