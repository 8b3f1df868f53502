"""A time-sliced GPU pulled out of Prometheus, landed, attributed and built into the marts.

An in-process fake Prometheus holds GPU A's series for one job (an `hpc_job` label, or a pod)
over twenty scrapes and a second job's series over the last ten (dcgm-exporter copies the
device's values to each sharer), and GPU B's for one job throughout. The puller lands one row per
sharer while A is shared, so DESIGN §4 splits A's time and energy between the two jobs.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from collector.sources.prometheus.pull import PullConfig, pull
from tests.marts.shared_split import SCRAPES, SHARED_FROM, STEP_S, attributed_jobs, sharer_rows
from warehouse.lake import Lake

T0 = dt.datetime(2026, 11, 2, 0, 0, tzinfo=dt.UTC)
T0_S = T0.timestamp()
FAMILIES = {  # family → value at scrape k (the energy counter in mJ)
    "DCGM_FI_DEV_GPU_UTIL": lambda k: "60",
    "DCGM_FI_DEV_POWER_USAGE": lambda k: "10",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": lambda k: str(300_000 * k),
}
_QUERY = re.compile(r"^(?P<family>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?\[(?P<ms>\d+)ms\]$")
TARGET = {"instance": "g001:9400", "job": "dcgm", "namespace": "gpu-operator", "pod": "dcgm-x"}


def gpu(uuid: str, index: int) -> dict[str, str]:
    return {"UUID": uuid, "gpu": str(index), "Hostname": "g001", **TARGET}


HPC = ({"hpc_job": "7"}, {"hpc_job": "8"}, {"hpc_job": "9"}, ("7", "8", "9"))
PODS = (  # the exporter's own pod labels were renamed exported_* (honor_labels: false)
    {"exported_namespace": "team-a", "exported_pod": "trainer-0", "exported_container": "main"},
    {"exported_namespace": "team-a", "exported_pod": "trainer-1", "exported_container": "main"},
    {"exported_namespace": "team-b", "exported_pod": "solo", "exported_container": "main"},
    ("team-a/trainer-0", "team-a/trainer-1", "team-b/solo"),
)


class SharedGpuPrometheus:
    """Answers the puller's queries from the hand-made series above."""

    url = "http://fake:9090"

    def __init__(self, labels: tuple) -> None:
        first, second, other = labels[:3]
        self.series_of = [  # (labels, first scrape k of the series)
            ({**gpu("GPU-aaaa", 0), **first}, 0),
            ({**gpu("GPU-aaaa", 0), **second}, SHARED_FROM),
            ({**gpu("GPU-bbbb", 1), **other}, 0),
        ]

    def range_vector(self, query: str, at_s: float) -> bytes:
        found = _QUERY.match(query)
        assert found, query
        lo_s = at_s - int(found["ms"]) / 1000
        value = FAMILIES[found["family"]]
        result = []
        for labels, since in self.series_of:
            points = [
                [T0_S + STEP_S * k, value(k)]
                for k in range(since, SCRAPES)
                if lo_s <= T0_S + STEP_S * k <= at_s
            ]
            if points:
                metric = {"__name__": found["family"], **labels}
                result.append({"metric": metric, "values": points})
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return json.dumps(body).encode()

    def family_names(self, match: str, start_s: float, end_s: float) -> list[str]:
        return [*FAMILIES, "up"]

    def series(self, match: str, start_s: float, end_s: float) -> list[dict[str, str]]:
        return [{"__name__": "up", **TARGET}]

    def close(self) -> None:
        pass


def pull_hour(root: Path, labels: tuple, *, reset: bool = False) -> None:
    config = PullConfig(cluster="c", since=T0, until=T0 + dt.timedelta(hours=1), reset=reset)
    summary = pull(
        config, Lake.at(root), SharedGpuPrometheus(labels), clock=lambda: T0 + dt.timedelta(hours=2)
    )
    assert summary.windows == 1 and summary.counts == {}


@pytest.mark.parametrize("labels", [HPC, PODS], ids=["hpc_job", "pods"])
def test_a_shared_gpu_is_split_between_its_sharers(labels, tmp_path):
    one, two, solo = labels[3]
    pull_hour(tmp_path, labels)
    pull_hour(tmp_path, labels, reset=True)  # the window pulled again replaces itself

    samples = (
        pads.dataset(tmp_path / "gpu_samples", format="parquet", partitioning="hive")
        .to_table()
        .to_pylist()
    )
    shared = sharer_rows(samples, T0, one, two)
    assert {(r["power_w"], r["interval_s"]) for r in shared} == {(10.0, STEP_S)}
    if labels is PODS:
        assert {(r["job_id"], r["k8s_pod"], r["k8s_container"]) for r in shared} == {
            (one, "trainer-0", "main"),
            (two, "trainer-1", "main"),
        }
    else:
        assert all(r["hpc_job"] == r["job_id"] for r in shared)

    attributed_jobs(tmp_path, one, two, solo)
