"""The shipped Grafana dashboards (deploy/grafana/*.json) are provisioning-ready: a datasource
variable every query uses, stable uids, and only series that `gpuledger serve` declares (the
live test, test_live_prometheus.py, runs every query against a real Prometheus)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from app.serve.exposition import METRICS

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "deploy" / "grafana"
DASHBOARDS = sorted(GRAFANA.glob("*.json"))
GPULEDGER_NAME = re.compile(r"\bgpuledger_[a-z_]+\b")
DS = {"type": "prometheus", "uid": "${datasource}"}


def test_the_four_dashboards_ship():
    names = {p.stem for p in DASHBOARDS}
    assert names == {"cluster-overview", "accounts", "job-drilldown", "health"}
    uids = [json.loads(p.read_text())["uid"] for p in DASHBOARDS]
    assert len(set(uids)) == len(uids)


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_every_query_goes_through_the_datasource_variable(path):
    board = json.loads(path.read_text(encoding="utf-8"))
    [datasource] = [v for v in board["templating"]["list"] if v["type"] == "datasource"]

    assert datasource["name"] == "datasource" and datasource["query"] == "prometheus"
    assert board.get("id") is None  # provisioning assigns ids
    for panel in board["panels"]:
        assert panel["datasource"] == DS, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DS, panel["title"]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            assert var["datasource"] == DS, var["name"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_dashboards_use_only_declared_series(path):
    text = path.read_text(encoding="utf-8")
    used = set(GPULEDGER_NAME.findall(text)) - {"gpuledger"}

    assert used, path.name
    assert used <= set(METRICS), sorted(used - set(METRICS))


def test_the_job_drilldown_joins_dcgm_exporter_with_gpuledger():
    board = json.loads((GRAFANA / "job-drilldown.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]

    joined = [e for e in exprs if "DCGM_FI_" in e and "gpuledger_job_gpu_info" in e]
    assert joined and all("on(Hostname, gpu)" in e for e in joined)
    assert any('hpc_job="$job"' in e for e in exprs)


def test_the_provisioning_examples_parse():
    dashboards = yaml.safe_load((GRAFANA / "provisioning/dashboards/gpuledger.yaml").read_text())
    sources = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yaml").read_text())

    assert dashboards["providers"][0]["type"] == "file"
    assert sources["datasources"][0]["type"] == "prometheus"
