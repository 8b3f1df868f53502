"""The shipped Grafana dashboards and Prometheus rules against dcgm-exporter as it is: both
generations of its names, the fields its default counters leave out, and panels that compare like
with like. Panel queries run through the real promtool (`promtool test rules` evaluates any
PromQL on hand-made series), beside tests/serve/test_live_prometheus.py, which checks that every
panel returns data from a simulated fleet."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.live  # runs promtool

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "deploy" / "grafana"
PROMETHEUS = REPO / "deploy" / "prometheus"
RULES = PROMETHEUS / "rules" / "gpuledger-dcgm.rules.yml"
DASHBOARDS = sorted(GRAFANA.glob("*.json"))
FIXTURES = REPO / "tests" / "fixtures" / "dcgm-exporter"
PAGE = REPO / "docs" / "integrations" / "prometheus-grafana.md"
DCGM_NAME = re.compile(r"\bDCGM_FI_[A-Z0-9_]*[A-Z0-9]\b")


def board(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((GRAFANA / f"{name}.json").read_text(encoding="utf-8"))
    return result


def panel(dashboard: dict[str, Any], title_start: str) -> dict[str, Any]:
    [found] = [p for p in dashboard["panels"] if p["title"].startswith(title_start)]
    return found


def rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def dashboard_exprs(path: Path) -> list[str]:
    panels = json.loads(path.read_text(encoding="utf-8"))["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def renames() -> dict[str, str]:
    """dcgm-exporter ≤4.8 name → the DCGM 4.7 name 4.9 renamed it to (dcgm.md §1.8)."""
    with (FIXTURES / "dcgm_4.6.0_field_ids.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        alias.strip(): row["canonical_name_dcgm_4.6"]
        for row in rows
        for alias in (row["legacy_aliases"] or "").split(";")
        if alias.strip()
    }


def promtool_eval(tmp_path: Path, series: dict[str, str], checks: list[dict[str, Any]]) -> str:
    """Evaluate PromQL on hand-made series (30 s apart) with promtool; its output on failure."""
    test = {
        "rule_files": [],
        "evaluation_interval": "30s",
        "tests": [
            {
                "interval": "30s",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "promql_expr_test": checks,
            }
        ],
    }
    path = tmp_path / "panel.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    result = subprocess.run(
        ["promtool", "test", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def substitute(expr: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        expr = expr.replace(f"${name}", value)
    return expr


# ---- dcgm-exporter's two generations of names ----


READING_DCGM = [RULES, *(p for p in DASHBOARDS if "DCGM_FI_" in p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("path", READING_DCGM, ids=[p.stem for p in READING_DCGM])
def test_every_field_is_read_under_both_generations_of_names(path):
    exprs = rule_exprs() if path == RULES else dashboard_exprs(path)
    used = {name for expr in exprs for name in DCGM_NAME.findall(expr)}
    old_to_new = {old: new for old, new in renames().items() if old != new}
    new_to_old = {new: old for old, new in old_to_new.items()}

    missing = sorted(
        f"{name} without {other}"
        for name in used
        for other in (old_to_new.get(name), new_to_old.get(name))
        if other and other not in used
    )
    assert used and not missing, missing


# ---- the busy-GPU panel: one quantity from both sources ----

JOB = {"cluster": "c1", "job": "7"}
INFO = 'gpuledger_job_gpu_info{{cluster="c1",job_id="7",node="{node}",gpu="{gpu}"}}'


def test_the_busy_gpu_panel_counts_what_gpuledger_counts_busy(tmp_path):
    # Job 7 holds six GPUs. gpuledger calls one busy when it was active (busy >= 0.01, busy =
    # engine activity, else SM activity, else GPU_UTIL/100) for more of the bucket than idle.
    # n1/0 busy; n1/1 idle by its engine (GPU_UTIL says 100 %: the engine wins); n1/2 busy, its
    # value copied to jobs 7 and 8 that share it (once, not twice); n1/3 active for only the
    # last 3 of the 10 samples of the 5 minutes (idle for more of them: not busy); n2/0 a 4.9
    # exporter (`hostname`, GPU_UTIL as a 0..1 ratio: 0.3 is busy); n2/1 a 4.9 exporter's MIG GPU,
    # job 7's instance busy, another job's idle (busy, once). gpuledger says 4 busy. (Where a job
    # holds several instances of one GPU the two may differ: the panel's description says how.)
    engine, engine_49 = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"
    series = {
        f'{engine}{{Hostname="n1",gpu="0",UUID="GPU-a",hpc_job="7"}}': "0.6x20",
        f'{engine}{{Hostname="n1",gpu="1",UUID="GPU-b",hpc_job="7"}}': "0.005x20",
        'DCGM_FI_DEV_GPU_UTIL{Hostname="n1",gpu="1",UUID="GPU-b",hpc_job="7"}': "100x20",
        f'{engine}{{Hostname="n1",gpu="2",UUID="GPU-c",hpc_job="7"}}': "0.02x20",
        f'{engine}{{Hostname="n1",gpu="2",UUID="GPU-c",hpc_job="8"}}': "0.02x20",
        f'{engine}{{Hostname="n1",gpu="3",UUID="GPU-d",hpc_job="7"}}': "0x17 0.9x3",
        'DCGM_FI_DEV_GPU_UTIL_RATIO{hostname="n2",gpu="0",UUID="GPU-e",hpc_job="7"}': "0.3x20",
        f'{engine_49}{{hostname="n2",gpu="1",UUID="GPU-f",GPU_I_ID="1"}}': "0.4x20",
        f'{engine_49}{{hostname="n2",gpu="1",UUID="GPU-f",GPU_I_ID="2"}}': "0x20",
        'gpuledger_job_gpus{cluster="c1",job_id="7",state="busy"}': "4x20",
    }
    for node, gpu in [("n1", 0), ("n1", 1), ("n1", 2), ("n1", 3), ("n2", 0), ("n2", 1)]:
        series[INFO.format(node=node, gpu=gpu)] = "1x20"
    busy = panel(board("job-drilldown"), "Busy GPUs")
    [dcgm, gpuledger] = busy["targets"]

    failed = promtool_eval(
        tmp_path,
        series,
        [
            {
                "expr": substitute(target["expr"], JOB),
                "eval_time": "10m",
                "exp_samples": [{"labels": labels, "value": 4}],
            }
            for target, labels in [
                (dcgm, "{}"),
                (gpuledger, 'gpuledger_job_gpus{cluster="c1",job_id="7",state="busy"}'),
            ]
        ],
    )

    assert not failed, failed
    assert "gpuledger's definition" in busy["description"]


# ---- SM activity, or engine activity where SM activity is not collected ----


def test_the_sm_panel_says_which_field_each_line_is(tmp_path):
    # n1/0 reports SM activity (enabled in the counters CSV) beside engine activity: SM shown;
    # n1/1 has dcgm-exporter's default counters (engine activity only); n2/0 is a 4.9 exporter
    # with SM activity under its new name.
    series = {
        'DCGM_FI_PROF_SM_ACTIVE{Hostname="n1",gpu="0",UUID="GPU-a"}': "0.4x20",
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="n1",gpu="0",UUID="GPU-a"}': "0.9x20",
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="n1",gpu="1",UUID="GPU-b"}': "0.7x20",
        'DCGM_FI_PROF_SM_UTIL_RATIO{hostname="n2",gpu="0",UUID="GPU-e"}': "0.2x20",
    }
    for node, gpu in [("n1", 0), ("n1", 1), ("n2", 0)]:
        series[INFO.format(node=node, gpu=gpu)] = "1x20"
    sm = panel(board("job-drilldown"), "SM activity")
    [target] = sm["targets"]
    engine = "engine activity (no SM field)"

    failed = promtool_eval(
        tmp_path,
        series,
        [
            {
                "expr": substitute(target["expr"], JOB),
                "eval_time": "10m",
                "exp_samples": [
                    {
                        "labels": '{Hostname="n1",gpu="0",UUID="GPU-a",field="SM activity",'
                        'job_id="7"}',
                        "value": 0.4,
                    },
                    {
                        "labels": f'{{Hostname="n1",gpu="1",UUID="GPU-b",field="{engine}",'
                        'job_id="7"}',
                        "value": 0.7,
                    },
                    {
                        "labels": '{Hostname="n2",hostname="n2",gpu="0",UUID="GPU-e",'
                        'field="SM activity",job_id="7"}',
                        "value": 0.2,
                    },
                ],
            }
        ],
    )

    assert not failed, failed
    assert "{{field}}" in target["legendFormat"]
    assert "engine activity" in sm["title"]  # not engine activity under an SM-only title


# ---- tables ----

TABLES = [
    (path.stem, p["title"])
    for path in DASHBOARDS
    for p in json.loads(path.read_text(encoding="utf-8"))["panels"]
    if p["type"] == "table"
]


@pytest.mark.parametrize("name, title", TABLES, ids=[f"{n}: {t}" for n, t in TABLES])
def test_merged_tables_name_every_value_column(name, title):
    table = panel(board(name), title)
    # Grafana names a table query's value column "Value", or "Value #<refId>" beside others
    refs = [t["refId"] for t in table["targets"]]
    columns = ["Value"] if len(refs) == 1 else [f"Value #{ref}" for ref in refs]
    organize = [t for t in table.get("transformations", []) if t["id"] == "organize"]

    assert organize, f"{title}: its columns are {columns}"
    named = organize[-1]["options"]["renameByName"]
    assert all(named.get(column, "").strip() for column in columns), (columns, named)
    assert len(set(named.values())) == len(named)


# ---- what dcgm-exporter must collect: the page says how ----


def test_the_page_says_how_to_collect_each_field_the_default_counters_leave_out():
    commented = {}
    for line in (FIXTURES / "default-counters.csv").read_text().splitlines():
        match = re.match(r"^#\s*(DCGM_FI_[A-Z0-9_]+)\s*,", line)
        if match:
            commented[match.group(1)] = line
    exprs = rule_exprs() + [e for path in DASHBOARDS for e in dashboard_exprs(path)]
    used = {name for expr in exprs for name in DCGM_NAME.findall(expr)}
    needed = sorted(used & set(commented))
    page = PAGE.read_text()

    assert needed == ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_PROF_SM_ACTIVE"]
    for name in needed:
        assert commented[name] in page, f"the page does not show the CSV line of {name}"
        new = renames().get(name, name)
        assert f"`{new}`" in page, f"the page does not name {name} under its 4.9 name {new}"


# ---- the page's scrape jobs are the shipped file's ----


def test_the_pages_scrape_jobs_match_the_shipped_prometheus_yml(tmp_path):
    shipped = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in shipped["scrape_configs"]}
    page = PAGE.read_text()
    blocks = [
        yaml.safe_load(block)
        for block in re.findall(r"```yaml\n(.*?)```", page, re.S)
        if "job_name:" in block
    ]
    examples = [
        job
        for block in blocks
        for job in (block if isinstance(block, list) else block.get("scrape_configs", []))
    ]

    assert examples
    for example in examples:
        name = example["job_name"]
        assert name in jobs, f"{name}: not a job of the shipped prometheus.yml"
        for key in ("static_configs", "scrape_interval", "honor_labels"):
            assert example.get(key) == jobs[name].get(key), (name, key)
        # pasteable: the example in place of the shipped job is a valid configuration
        config = json.loads(json.dumps(shipped))
        config["scrape_configs"] = [example if j["job_name"] == name else j for j in jobs.values()]
        config["rule_files"] = [str(PROMETHEUS / f) for f in shipped["rule_files"]]
        token = tmp_path / "token"
        token.write_text("t\n")
        if "authorization" in example:
            example["authorization"]["credentials_file"] = str(token)
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        checked = subprocess.run(
            ["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    # the page says what the shipped file scrapes: all of its jobs
    scraping = page.split("## Scraping it", 1)[1].split("\n## ", 1)[0]
    prose = re.sub(r"```.*?```", "", scraping, flags=re.S)
    assert all(f"`{name}`" in prose for name in jobs), sorted(jobs)
