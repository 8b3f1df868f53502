"""Which tests one pytest-xdist worker must run together (`make test` runs two workers).

Each test file is a unit, so its module fixtures are built once. The folders in WHOLE_FOLDERS
are one unit each: their conftest builds session fixtures (a simulated lake, a Prometheus with
days of history) worth building once. Every test that drives the live Slurm is one unit, run
first because it is the longest: tests/slurm_live starts the cluster once per session and holds
its lock until the session ends, so a second worker's live test would wait for it and fail.
"""

from __future__ import annotations

SLURM_LIVE = "slurm_live"
SLURM_LIVE_FILES = frozenset({"tests/report/test_live_fairshare.py"})
WHOLE_FOLDERS = frozenset({"dashboard", "prometheus"})


def scheduling_unit(nodeid: str) -> str:
    """The unit of the test `nodeid`: one worker runs a unit's tests in their collected order."""
    path = nodeid.split("::", 1)[0]
    folder = path.split("/")[1] if path.count("/") >= 2 else ""
    if folder == SLURM_LIVE or path in SLURM_LIVE_FILES:
        return SLURM_LIVE
    return folder if folder in WHOLE_FOLDERS else path
