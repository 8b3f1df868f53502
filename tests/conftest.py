"""Settings every test shares.

Hypothesis runs derandomized by default, so `make test` (and CI) draws the same examples every
run: a red build is a real regression, reproducible by running the test again. `make check`
loads the `check` profile: derandomized too, at most 5 examples per property (tests that set
their own count use tests/infra/examples.py), and its engines run on one thread each. Explore
with fresh random examples, without the per-example deadline a loaded 2-core machine would
trip: `HYPOTHESIS_PROFILE=explore make test`.

Tests that need a real external program are marked `live` (tests/infra/live.py): `make check`
deselects them; under `make test` (GPULEDGER_REQUIRE_LIVE=1) a live test that skips fails.
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.infra.examples import CHECK_MAX_EXAMPLES, CHECK_PROFILE, PROFILE_ENV
from tests.infra.live import Collected, failed_skip, is_live_service, unmarked_live
from tests.infra.scheduling import SLURM_LIVE, scheduling_unit
from warehouse.connection import set_engine_threads

settings.register_profile("repeatable", derandomize=True, deadline=None, print_blob=True)
settings.register_profile(
    CHECK_PROFILE,
    derandomize=True,
    deadline=None,
    print_blob=True,
    max_examples=CHECK_MAX_EXAMPLES,
)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get(PROFILE_ENV, "repeatable"))
if os.environ.get(PROFILE_ENV) == CHECK_PROFILE:
    # `make check`: one worker per core, so each worker's engines take one thread (8 % less CPU
    # than a thread per core on its small lakes); `make test` keeps DuckDB's default.
    set_engine_threads(1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`make test`'s two workers: tests/infra/scheduling.py says which tests share one."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    config.option.loadscopereorder = False  # keep the collected order: the live Slurm first
    return UnitScheduling(config, log)


def _collected(item: pytest.Item) -> Collected:
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.items() if info is not None else ()
    return Collected(
        nodeid=item.nodeid,
        markers=frozenset(mark.name for mark in item.iter_markers()),
        live_fixtures=frozenset(
            name for name, defs in definitions if any(is_live_service(d.func) for d in defs)
        ),
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    offenders = unmarked_live(_collected(item) for item in items)
    if offenders:
        raise pytest.UsageError(
            "tests that start a real service must be marked live "
            "(pytestmark = pytest.mark.live, tests/infra/live.py):\n  " + "\n  ".join(offenders)
        )
    if hasattr(config, "workerinput"):  # an xdist worker: the live Slurm's unit goes first
        items.sort(key=lambda item: scheduling_unit(item.nodeid) != SLURM_LIVE)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under `make test` (GPULEDGER_REQUIRE_LIVE=1) a live test that skips is a failure."""
    report: pytest.TestReport = yield
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        failure = failed_skip(str(reason), live=item.get_closest_marker("live") is not None)
        if failure is not None:
            report.outcome = "failed"
            report.longrepr = failure
    return report  # type: ignore[return-value]


@pytest.fixture
def spawn_safe_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean `__main__` for tests that start processes with the `spawn` method.

    A spawned child first runs the parent's `__main__` file again; after a dashboard test in the
    same worker that is `app/streamlit_app.py` (Streamlit's AppTest leaves it there), which
    fails outside Streamlit and leaves the child dead before it runs its target."""
    import sys
    import types

    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
