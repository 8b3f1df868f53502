"""`make test`'s two workers must never both drive the live Slurm (tests/infra/scheduling.py)."""

from __future__ import annotations

from pathlib import Path

from tests.infra.scheduling import SLURM_LIVE, scheduling_unit

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_that_drives_the_live_slurm_is_in_its_unit():
    imports_the_cluster = f"from tests.{SLURM_LIVE}"
    live = {
        f"tests/{path.relative_to(TESTS).as_posix()}"
        for path in TESTS.rglob("test_*.py")
        if imports_the_cluster in path.read_text() or path.parent.name == SLURM_LIVE
    }
    assert "tests/report/test_live_fairshare.py" in live
    assert "tests/slurm_live/test_soak.py" in live
    assert {scheduling_unit(f"{path}::test_x") for path in live} == {SLURM_LIVE}


def test_other_tests_are_units_by_file_or_by_folder_with_session_fixtures():
    assert scheduling_unit("tests/marts/test_incremental.py::test_a[x]") == (
        "tests/marts/test_incremental.py"
    )
    assert scheduling_unit("tests/report/test_fairshare.py::test_b") == (
        "tests/report/test_fairshare.py"
    )
    assert scheduling_unit("tests/dashboard/test_browser.py::test_c") == "dashboard"
    assert scheduling_unit("tests/prometheus/test_faults.py::test_d") == "prometheus"
