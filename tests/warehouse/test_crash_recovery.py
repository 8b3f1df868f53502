"""A process killed between the renames of a merge or of a batch landed again leaves no row twice
once the next writer (or `attribute`, `run`) has finished the change it recorded
(warehouse/intents.py).

The kill is real: the change runs in a forked child that dies by `os._exit` at the chosen step
(no `finally`, no exit handler, its table lock released by the kernel), exactly as a SIGKILL
would leave the files, since every step before it is fsynced.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from warehouse import intents, layout, writer
from warehouse.connection import WarehouseConfig, open_engine, register_table

KILLED = 137


def second_source(path: object, *_: object) -> bool:
    """Path.unlink of a merge's second source (w1): its first (w0) is removed already."""
    return isinstance(path, Path) and path.name == "w1.parquet"


AFTER_FIRST_SOURCE_REMOVED = ((Path, "unlink"), second_source)


def run_killed(
    step: Callable[..., None],
    die_at: tuple[object, str],
    when: Callable[..., bool] = lambda *_args, **_kwargs: True,
) -> None:
    """Run `step` in a forked child that dies when `die_at` (an object and the name of one of
    its functions) is called with arguments `when` accepts; fail unless it died there."""
    pid = os.fork()
    if pid == 0:  # the child: nothing here may return into pytest
        try:
            owner, name = die_at
            real = getattr(owner, name)

            def dying(*args: object, **kwargs: object) -> object:
                if when(*args, **kwargs):
                    os._exit(KILLED)
                return real(*args, **kwargs)

            setattr(owner, name, dying)
            step()
        finally:
            os._exit(0)  # the step finished without reaching its death: the test fails
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == KILLED, "the child did not die where told"


def rows(lake: Path) -> list[tuple[object, ...]]:
    """The samples a reader sees: the `gpu_samples` view `connect` makes, over the lake's
    files as they are (without the other tables' views, 0.1 CPU-s a connection)."""
    with open_engine(WarehouseConfig(lake)) as con:
        register_table(con, lake, "gpu_samples")
        return con.sql("SELECT node, ts, power_w FROM gpu_samples ORDER BY ALL").fetchall()


def land(lake: Path, make_samples, t0: dt.datetime, node: str, batch: str, power: float) -> None:
    writer.write_batch(lake, "gpu_samples", make_samples([t0], node=node, power_w=power), batch)


def left_intents(lake: Path) -> list[str]:
    return sorted(
        name
        for _, _, names in os.walk(lake / "gpu_samples")
        for name in names
        if name.startswith(intents.PREFIX)
    )


@pytest.fixture
def three_batches(lake, make_samples, t0) -> list[tuple[object, ...]]:
    for i in range(3):
        land(lake, make_samples, t0, f"g00{i}", f"w{i}", 300.0)
    return rows(lake)


def test_a_merge_killed_after_its_rename_loses_its_sources_on_recovery(lake, three_batches):
    run_killed(lambda: writer.compact(lake, "gpu_samples"), *AFTER_FIRST_SOURCE_REMOVED)

    assert len(rows(lake)) == 5  # the merged file and two of its sources: rows held twice
    assert writer.recover(lake) == 1
    assert rows(lake) == three_batches
    assert [p.name[:8] for p in layout.table_files(lake, "gpu_samples")] == ["compact-"]
    assert left_intents(lake) == []


def test_a_merge_killed_before_its_rename_leaves_the_files_as_they_were(lake, three_batches):
    run_killed(lambda: writer.compact(lake, "gpu_samples"), (writer, "atomic_write"))

    assert left_intents(lake) != []
    assert writer.recover(lake) == 1
    assert rows(lake) == three_batches
    assert len(layout.table_files(lake, "gpu_samples")) == 3
    assert left_intents(lake) == []


def test_a_batch_landed_again_and_killed_before_eviction_is_evicted_on_recovery(
    lake, make_samples, t0, three_batches
):
    writer.compact(lake, "gpu_samples")
    run_killed(lambda: land(lake, make_samples, t0, "g001", "w1", 50.0), (writer, "_evict"))

    assert len(rows(lake)) == 4  # w1's old row in the compacted file and its new one
    assert writer.recover(lake) == 1
    assert rows(lake) == [(n, t0, 50.0 if n == "g001" else 300.0) for n in ("g000", "g001", "g002")]
    assert left_intents(lake) == []


def test_the_next_landing_in_the_partition_finishes_the_change_first(
    lake, make_samples, t0, three_batches
):
    writer.compact(lake, "gpu_samples")
    run_killed(lambda: land(lake, make_samples, t0, "g001", "w1", 50.0), (writer, "_evict"))

    land(lake, make_samples, t0, "g009", "w9", 10.0)  # no recover() call: the writer does it

    assert [r[0] for r in rows(lake)] == ["g000", "g001", "g002", "g009"]
    assert left_intents(lake) == []


def test_compaction_of_closed_days_recovers_first(lake, make_samples, t0, three_batches):
    run_killed(lambda: writer.compact(lake, "gpu_samples"), *AFTER_FIRST_SOURCE_REMOVED)

    writer.compact_closed_days(lake, t0.date())  # t0's day is not closed yet: nothing to merge

    assert rows(lake) == three_batches
    assert left_intents(lake) == []


def test_a_source_changed_since_the_merge_was_recorded_is_kept(
    lake, make_samples, t0, three_batches
):
    run_killed(lambda: writer.compact(lake, "gpu_samples"), *AFTER_FIRST_SOURCE_REMOVED)
    survivor = sorted(p for p in layout.table_files(lake, "gpu_samples") if p.name != "w0.parquet")
    survivor = [p for p in survivor if not p.name.startswith("compact-")]
    os.utime(survivor[0], ns=(1, 1))  # not the file the intent names any more

    writer.recover(lake)

    assert survivor[0].exists()
    assert left_intents(lake) == []


def test_an_intent_this_version_cannot_read_is_left_alone(lake, three_batches):
    folder = layout.table_files(lake, "gpu_samples")[0].parent
    odd = folder / f"{intents.PREFIX}merge-x.json"
    odd.write_text("{not json")

    assert writer.recover(lake) == 0
    assert odd.exists()
    assert rows(lake) == three_batches
