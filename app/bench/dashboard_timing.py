"""How long each dashboard page takes to render on a lake, cold (for `gpuledger bench`).

Each page runs once through Streamlit's AppTest from the real entry script, after every
cache is cleared, so the figure includes opening the lake and running the page's queries.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files

from warehouse.lake import Lake

__all__ = ["PAGES", "PageFailed", "time_pages"]

# page name -> its file, relative to the entry script
PAGES = {
    "overview": "app_pages/overview.py",
    "jobs": "app_pages/jobs.py",
    "job": "app_pages/job.py",
    "users": "app_pages/users.py",
    "fairness": "app_pages/fairness.py",
    "health": "app_pages/health.py",
    "alerts": "app_pages/alerts.py",
}


class PageFailed(RuntimeError):
    """A page raised while it was being timed."""


@contextmanager
def _lake_env(lake: Lake) -> Iterator[None]:
    # the dashboard reads its lake from the environment, as `gpuledger dashboard` passes it
    before = os.environ.get("GPULEDGER_LAKE")
    os.environ["GPULEDGER_LAKE"] = str(lake.root.resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GPULEDGER_LAKE", None)
        else:
            os.environ["GPULEDGER_LAKE"] = before


def _no_runtime_warnings(record: logging.LogRecord) -> bool:
    # Outside a server every cached function says that it caches in memory, and clearing the
    # caches between pages that no script is running: true, and expected here.
    message = record.getMessage()
    return not message.startswith("No runtime found") and "missing ScriptRunContext" not in message


def time_pages(lake: Lake, timeout_s: float = 120) -> dict[str, float]:
    """Seconds each page takes to render on `lake` with cold caches, by page name.

    One untimed run first loads the libraries the server process would already have loaded
    (Streamlit, Altair, DuckDB's Arrow bridge); then every page is timed after clearing the
    caches. Raises PageFailed naming the page and its exception when a page fails.
    """
    from streamlit.runtime.caching import cache_data_api, cache_resource_api
    from streamlit.runtime.scriptrunner_utils import script_run_context
    from streamlit.testing.v1 import AppTest

    for api in (cache_data_api, cache_resource_api, script_run_context):
        logger = logging.getLogger(api.__name__)
        if _no_runtime_warnings not in logger.filters:
            logger.addFilter(_no_runtime_warnings)
    from app.data import clear_caches

    entry = str(files("app").joinpath("streamlit_app.py"))
    timings: dict[str, float] = {}
    with _lake_env(lake):
        AppTest.from_file(entry, default_timeout=timeout_s).run()  # warm-up, not timed
        for name, page in PAGES.items():
            clear_caches()
            app = AppTest.from_file(entry, default_timeout=timeout_s)
            app.switch_page(page)
            started = time.perf_counter()
            app.run()
            timings[name] = time.perf_counter() - started
            if app.exception:
                raise PageFailed(f"page {name!r} failed: {app.exception[0].value}")
    return timings
