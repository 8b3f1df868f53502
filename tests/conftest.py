"""Settings every test shares.

Hypothesis runs derandomized by default, so `make test` (and CI) draws the same examples every
run: a red build is a real regression, reproducible by running the test again. Explore with
fresh random examples, without the per-example deadline a loaded 2-core machine would trip:
`HYPOTHESIS_PROFILE=explore make test`.
"""

import os

import pytest
from hypothesis import settings

from tests.infra.scheduling import SLURM_LIVE, scheduling_unit

settings.register_profile("repeatable", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`make test`'s two workers: tests/infra/scheduling.py says which tests share one."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    config.option.loadscopereorder = False  # keep the collected order: the live Slurm first
    return UnitScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the live Slurm's unit goes first
        items.sort(key=lambda item: scheduling_unit(item.nodeid) != SLURM_LIVE)
