"""Lakes the dashboard tests share: a small simulated one with findings, recommendations and
fairness rows, one without those extras, and a missing one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.dashboard.lakes import add_findings_and_more, make_sim_lake
from warehouse.connection import connect


@pytest.fixture(scope="session")
def demo_lake_names(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = make_sim_lake(tmp_path_factory.mktemp("dashboard-demo"), gpus=16, days=2)
    return root, add_findings_and_more(root)


@pytest.fixture(scope="session")
def demo_lake(demo_lake_names: tuple[Path, dict[str, str]]) -> Path:
    return demo_lake_names[0]


@pytest.fixture(scope="session")
def demo_con(demo_lake: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One connection over the demo lake for what the tests read of it themselves (a third of
    a second a connection); no test writes to the demo lake."""
    con = connect(demo_lake)
    yield con
    con.close()


@pytest.fixture(scope="session")
def names(demo_lake_names: tuple[Path, dict[str, str]]) -> dict[str, str]:
    return demo_lake_names[1]


@pytest.fixture(scope="session")
def plain_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated lake with no findings or recommendations (its fairness mart is `attribute`'s)."""
    return make_sim_lake(tmp_path_factory.mktemp("dashboard-plain"), gpus=16, days=1)


@pytest.fixture(autouse=True, scope="session")
def _components_scanned_once() -> Iterator[None]:
    """Scan the installed packages for Streamlit components once per test process.

    Every new AppTest scans the metadata of each installed distribution for Streamlit
    components (streamlit.components.v2.manifest_scanner: ~0.3 s each, about a third of a
    page test). The packages do not change while the tests run, so each AppTest gets the
    first scan's result: the same components the app has when it is served.
    """
    from streamlit.components.v2 import manifest_scanner

    scanned = manifest_scanner.scan_component_manifests()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests", lambda *_, **__: scanned)
        yield
