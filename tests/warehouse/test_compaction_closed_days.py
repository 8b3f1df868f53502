"""DESIGN §3 "small files are compacted": what `gpuledger attribute` (and the service's round)
compacts on its own: raw tables' day partitions of many files, once their day is well over."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from warehouse import layout, writer
from warehouse.connection import WarehouseConfig, open_engine, register_table

UTC = dt.UTC
TODAY = dt.date(2024, 3, 10)


def land_scrapes(lake: Path, make_samples, day: dt.date, scrapes: int, node: str = "g001"):
    """One file per scrape, as dcgm-exporter collection lands them: `scrapes` 15 s apart."""
    start = dt.datetime.combine(day, dt.time(12), tzinfo=UTC)
    for i in range(scrapes):
        ts = start + dt.timedelta(seconds=15 * i)
        writer.write_batch(lake, "gpu_samples", make_samples([ts], node=node), f"scrape-{i:04d}")


Scrapes = Callable[[Path, dt.date, int], None]


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory: pytest.TempPathFactory, make_samples) -> Scrapes:
    """`scrapes(lake, day, n)`: the first `n` scrapes of `day` (`land_scrapes`) in `lake`.

    Each day's scrapes are landed by the writer once per module, into a lake of their own
    (17 CPU-ms a file: 400 files in this module), and copied file by file into each test's lake
    with the cluster's name the writer records: the files the writer would have made there.
    """
    landed: dict[dt.date, Path] = {}

    def copy(lake: Path, day: dt.date, n: int) -> None:
        assert n <= writer.COMPACT_MIN_FILES
        if day not in landed:
            landed[day] = tmp_path_factory.mktemp(f"scrapes-{day}") / "lake"
            land_scrapes(landed[day], make_samples, day, writer.COMPACT_MIN_FILES)
        source = landed[day]
        shutil.copytree(
            source / "_state" / "clusters", lake / "_state" / "clusters", dirs_exist_ok=True
        )
        for path in sorted(layout.table_files(source, "gpu_samples"))[:n]:  # scrape-0000 on
            into = lake / path.relative_to(source)
            into.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, into)

    return copy


def files_per_day(lake: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in layout.table_files(lake, "gpu_samples"):
        counts[path.parent.name] = counts.get(path.parent.name, 0) + 1
    return counts


def rows(lake: Path) -> list[tuple]:
    """The samples' rows, through the view `connect` makes of gpu_samples, alone (a view of
    every table would cost more than the query)."""
    with open_engine(WarehouseConfig(lake)) as con:
        register_table(con, lake, "gpu_samples")
        return con.sql("SELECT node, ts, power_w FROM gpu_samples ORDER BY ALL").fetchall()


def test_closed_days_with_many_files_become_one_file_and_the_rows_stay(lake, scrapes):
    many = writer.COMPACT_MIN_FILES
    scrapes(lake, TODAY - dt.timedelta(days=5), many)
    scrapes(lake, TODAY - dt.timedelta(days=2), many)
    scrapes(lake, TODAY - dt.timedelta(days=1), many)  # yesterday: grace
    scrapes(lake, TODAY, many)  # still being written
    scrapes(lake, TODAY - dt.timedelta(days=4), many - 1)  # few files
    before = rows(lake)

    assert writer.compact_closed_days(lake, TODAY) == 2

    assert files_per_day(lake) == {
        "date=2024-03-05": 1,
        "date=2024-03-06": many - 1,
        "date=2024-03-08": 1,
        "date=2024-03-09": many,
        "date=2024-03-10": many,
    }
    assert rows(lake) == before
    assert writer.compact_closed_days(lake, TODAY) == 0  # nothing left to do


def test_a_scrape_landed_again_after_compaction_replaces_its_row(lake, make_samples, scrapes):
    day = TODAY - dt.timedelta(days=3)
    scrapes(lake, day, writer.COMPACT_MIN_FILES)
    writer.compact_closed_days(lake, TODAY)
    ts = dt.datetime.combine(day, dt.time(12), tzinfo=UTC)

    writer.write_batch(lake, "gpu_samples", make_samples([ts], power_w=111.0), "scrape-0000")

    got = rows(lake)
    assert len(got) == writer.COMPACT_MIN_FILES
    assert ("g001", ts, 111.0) in got and ("g001", ts, 300.0) not in got


def test_max_bytes_bounds_each_merged_file(lake, scrapes):
    scrapes(lake, TODAY - dt.timedelta(days=3), 12)
    sizes = [p.stat().st_size for p in layout.table_files(lake, "gpu_samples")]
    before = rows(lake)

    # room for four files per merge: 12 files become 3
    assert writer.compact(lake, "gpu_samples", 2, max_bytes=4 * max(sizes)) == 1

    assert files_per_day(lake) == {"date=2024-03-07": 3}
    assert rows(lake) == before


def test_attribute_compacts_old_days_of_small_files(tmp_path, scrapes):
    lake = tmp_path / "lake"
    scrapes(lake, dt.date(2024, 3, 1), writer.COMPACT_MIN_FILES)

    result = CliRunner().invoke(cli, ["attribute", "--lake", str(lake), "-q"])

    assert result.exit_code == 0, result.output
    assert "1 day partition(s) of small files compacted" in result.output
    assert files_per_day(lake) == {"date=2024-03-01": 1}
    assert len(rows(lake)) == writer.COMPACT_MIN_FILES


def test_since_limits_compaction_to_days_from_it_on_and_keeps_the_grace(lake, scrapes):
    many = writer.COMPACT_MIN_FILES
    for days_ago in (5, 4, 2, 1):
        scrapes(lake, TODAY - dt.timedelta(days=days_ago), many)
    before = rows(lake)

    assert writer.compact_closed_days(lake, TODAY, since=TODAY - dt.timedelta(days=4)) == 2

    assert files_per_day(lake) == {
        "date=2024-03-05": many,  # before --since: left as it is
        "date=2024-03-06": 1,  # the since day itself
        "date=2024-03-08": 1,
        "date=2024-03-09": many,  # yesterday: the day of grace still holds
    }
    assert rows(lake) == before


def test_attribute_since_compacts_only_days_from_it_on(tmp_path, scrapes):
    lake = tmp_path / "lake"
    scrapes(lake, dt.date(2024, 3, 1), writer.COMPACT_MIN_FILES)
    scrapes(lake, dt.date(2024, 3, 3), writer.COMPACT_MIN_FILES)

    result = CliRunner().invoke(
        cli, ["attribute", "--lake", str(lake), "-q", "--since", "2024-03-02T12:00"]
    )

    assert result.exit_code == 0, result.output
    assert "1 day partition(s) of small files compacted" in result.output
    assert files_per_day(lake) == {
        "date=2024-03-01": writer.COMPACT_MIN_FILES,
        "date=2024-03-03": 1,
    }


def test_a_day_with_a_file_that_does_not_read_is_left_as_it_is_and_the_others_compacted(
    lake, scrapes
):
    many = writer.COMPACT_MIN_FILES
    scrapes(lake, TODAY - dt.timedelta(days=5), many)
    scrapes(lake, TODAY - dt.timedelta(days=3), many)
    damaged = sorted(layout.table_files(lake, "gpu_samples"))[0]  # on the earlier day
    damaged.write_bytes(b"PAR1 cut short")

    assert writer.compact_closed_days(lake, TODAY) == 1  # no traceback; the other day is done

    assert files_per_day(lake) == {"date=2024-03-05": many, "date=2024-03-07": 1}
    assert damaged.read_bytes() == b"PAR1 cut short"


def test_landing_a_batch_waits_while_its_table_is_locked_for_a_compaction(lake, make_samples):
    import threading

    landed = threading.Event()

    def land() -> None:
        ts = dt.datetime.combine(TODAY, dt.time(12), tzinfo=UTC)
        writer.write_batch(lake, "gpu_samples", make_samples([ts]), "late")
        landed.set()

    with layout.table_lock(lake, "gpu_samples"):
        lander = threading.Thread(target=land)
        lander.start()
        assert not landed.wait(0.5)  # held back while the partition may be merged
    assert landed.wait(30)
    lander.join()
    assert len(rows(lake)) == 1
