"""Re-attribution beside a landing, in two real processes (issue #22, HIGH 3).

A source (`gpuledger run`'s Prometheus puller, the spool) lands a window again, with newer
rows, while `reattribute` rewrites the same sample file with its owners. The re-attribution is
paused by its `seam` between two steps of its rewrite, in a process of its own, while another
process lands the window again: the newest samples must survive and every sample must get the
owner of its own row.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.marts import rows as r
from warehouse import layout
from warehouse.attribution import reattribute
from warehouse.connection import connect

# spawned children must not re-run a dashboard test's __main__ (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("spawn_safe_main")

WAIT_S = 60.0  # generous: 2 shared cores, spawned interpreters import pyarrow and duckdb


def _reattribute(lake: str, stage: str, paused: Any, go: Any) -> None:
    """Re-attribute the lake, pausing once at `stage` until `go` is set."""
    first = [True]

    def seam(at: str, _path: Path) -> None:
        if at == stage and first[0]:
            first[0] = False
            paused.set()
            if not go.wait(WAIT_S):
                raise TimeoutError("never told to go on")

    con = connect(Path(lake))
    try:
        reattribute(con, Path(lake), seam=seam)
    finally:
        con.close()


def _land(lake: str, rows: list[dict[str, Any]], started: Any) -> None:
    started.set()  # imported: what is left is the landing itself
    r.land(Path(lake), "gpu_samples", rows, batch_id="window")


def _race(lake: Path, stage: str, newer: list[dict[str, Any]]) -> bool:
    """Pause a re-attribution at `stage`, land `newer` as the same window meanwhile; return
    whether the landing finished while the re-attribution was paused."""
    ctx = mp.get_context("spawn")
    paused, go = ctx.Event(), ctx.Event()
    attributor = ctx.Process(target=_reattribute, args=(str(lake), stage, paused, go))
    attributor.start()
    try:
        assert paused.wait(WAIT_S), "the re-attribution never reached its pause"
        started = ctx.Event()
        lander = ctx.Process(target=_land, args=(str(lake), newer, started))
        lander.start()
        # a spawned interpreter's imports take seconds on a loaded machine; the landing, not
        assert started.wait(WAIT_S), "the landing process never started"
        lander.join(5.0)  # done by now unless it waits for the table's lock
        landed_meanwhile = lander.exitcode is not None
    finally:
        go.set()
    attributor.join(WAIT_S)
    lander.join(WAIT_S)
    assert (attributor.exitcode, lander.exitcode) == (0, 0)
    return landed_meanwhile


def _owners(lake: Path) -> list[tuple[int, float, str | None]]:
    """(gpu_index, seconds after T0, job_id) of every row of the landed window's file."""
    (path,) = layout.table_files(lake, "gpu_samples")
    table = pq.read_table(path).to_pylist()
    return sorted(
        (row["gpu_index"], row["ts"].timestamp() - r.T0_E, row["job_id"]) for row in table
    )


def test_a_window_landed_again_during_a_rewrite_keeps_its_newest_samples(tmp_path):
    # The window as first landed: GPU 0 over [0, 300); j1 holds it over [0, 1200).
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30)), batch_id="window")
    r.land(tmp_path, "job_gpus", [r.job_gpu("j1", 0, 1200)])
    newer = r.samples(range(0, 600, 30))  # the same window, landed again with 10 more samples

    # Paused after reading the file for its rewrite, before the rename.
    landed_meanwhile = _race(tmp_path, "read", newer)

    # The landing waited for the rewrite (the table's lock), then replaced the file: nothing
    # of the newer window is lost, and the next round gives its new rows their owner.
    assert len(_owners(tmp_path)) == 20
    assert not landed_meanwhile
    con = connect(tmp_path)
    reattribute(con, tmp_path)
    con.close()
    assert _owners(tmp_path) == [(0, float(t), "j1") for t in range(0, 600, 30)]


def test_a_window_landed_again_after_its_owners_were_computed_gets_its_own_owners(tmp_path):
    # The window as first landed: GPU 0 over [0, 300). j1 holds GPU 0, j2 GPU 1.
    r.land(tmp_path, "gpu_samples", r.samples(range(0, 300, 30)), batch_id="window")
    r.land(
        tmp_path,
        "job_gpus",
        [r.job_gpu("j1", 0, 1200), r.job_gpu("j2", 0, 1200, gpu_index=1)],
    )
    # Landed again with GPU 1's samples first: row numbers now mean other samples.
    newer = r.samples(range(0, 300, 30), gpu_index=1) + r.samples(range(0, 300, 30))

    # Paused once the owners of the first version's rows are known, before the rewrite.
    assert _race(tmp_path, "checked", newer)

    expected = sorted(
        [(1, float(t), "j2") for t in range(0, 300, 30)]
        + [(0, float(t), "j1") for t in range(0, 300, 30)]
    )
    assert _owners(tmp_path) == expected  # checked again: each row has its own owner
    con = connect(tmp_path)
    reattribute(con, tmp_path)  # and stays so
    con.close()
    assert _owners(tmp_path) == expected
