"""The Job page and `gpuledger job` give the same advice for the same job (one engine).

A hand-made lake with the two jobs the advice used to get wrong: one that hung (GPU_UTIL 100 %,
SM activity 0, a critical hung_job finding) until its time limit, and a 2-node job that ended
in NODE_FAIL after an XID 79 on one of its GPUs, 1 h into a 10 h limit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from app.bench.dashboard_timing import PAGES
from app.cli import cli
from app.markdown_text import md
from tests.marts import rows as r

H = 3600.0
ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("advice-lake")
    times = range(0, int(2 * H), 30)
    hung = [
        row
        for i in (0, 1)
        for row in r.samples(
            times, gpu_index=i, engine_active=0.01, sm_active=0.0, gpu_util_pct=100.0
        )
    ]
    broken = [
        row
        for i in (2, 3)
        for row in r.samples(
            range(0, int(H), 30), gpu_index=i, engine_active=0.9, sm_active=0.7, tensor_active=0.4
        )
    ]
    busy = r.samples(
        range(0, int(H), 30), gpu_index=4, engine_active=0.95, sm_active=0.8, tensor_active=0.5
    )
    jobs = [
        r.job(
            "hung",
            0,
            2 * H,
            gpus=2,
            state="TIMEOUT",
            time_limit_s=int(2 * H),
            cpus=16,
            cpu_time_s=2 * H,
            job_name="train-ddp",
            interactive=False,
        ),
        r.job(
            "nodefail",
            0,
            H,
            gpus=2,
            state="NODE_FAIL",
            time_limit_s=int(10 * H),
            cpus=16,
            cpu_time_s=2 * H,  # 2 of 16 cores: no --cpus-per-gpu after a node failure
            job_name="llama-pt",
        ),
        # busy on its one GPU for 1 h of a 1.5 h limit, then preempted
        r.job(
            "preempted",
            0,
            H,
            gpus=1,
            state="PREEMPTED",
            time_limit_s=int(1.5 * H),
            cpus=8,
            cpu_time_s=6 * H,
            interactive=False,
        ),
        # ran to completion near its limit, but its GPUs sent no telemetry at all
        r.job("dark", 0, H, gpus=1, state="COMPLETED", time_limit_s=int(H), interactive=False),
    ]
    job_gpus = (
        [r.job_gpu("hung", 0, 2 * H, gpu_index=i) for i in (0, 1)]
        + [r.job_gpu("nodefail", 0, H, gpu_index=i) for i in (2, 3)]
        + [r.job_gpu("preempted", 0, H, gpu_index=4)]
    )
    r.land(
        root,
        "findings",
        [
            {
                "cluster": r.CLUSTER,
                "finding_id": "f-hung",
                "detector": "hung_job",
                "severity": "critical",
                "subject_kind": "job",
                "subject_id": "hung",
                "job_id": "hung",
                "detected_ts": r.at(2 * H),
                "gpu_h_at_stake": 3.9,
                "message": "hung: GPU_UTIL 100% but SM activity ~0",
                "evidence": json.dumps({"state": "hung", "state_gpu_h": 3.9}),
            }
        ],
    )
    r.build_lake(
        root,
        samples=hung + broken + busy,
        jobs=jobs,
        job_gpus=job_gpus,
        events=[r.event(0.9 * H, "xid", 79, gpu_index=2)],
    )
    return root


@pytest.fixture(scope="module")
def job_json(lake: Path) -> Callable[[str], dict[str, Any]]:
    """`job_json(job_id)`: what `gpuledger job JOB --format json` prints, run once per job for
    the tests that read it."""
    said: dict[str, dict[str, Any]] = {}

    def run(job_id: str) -> dict[str, Any]:
        if job_id not in said:
            runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
            result = runner.invoke(cli, ["job", job_id, "--format", "json", "--lake", str(lake)])
            assert result.exit_code == 0, result.output
            said[job_id] = json.loads(result.output)
        return said[job_id]

    return run


@pytest.fixture(scope="module")
def job_page(lake: Path) -> Callable[[str], AppTest]:
    """`job_page(job_id)`: the Job page of that job on the lake, run once per job for the tests
    that read it."""
    shown: dict[str, AppTest] = {}

    def run(job_id: str) -> AppTest:
        if job_id not in shown:
            with pytest.MonkeyPatch.context() as env:
                env.setenv("GPULEDGER_LAKE", str(lake))
                for name in (
                    "GPULEDGER_DASHBOARD_MANAGERS",
                    "GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR",
                ):
                    env.delenv(name, raising=False)
                at = AppTest.from_file(str(ENTRY), default_timeout=60)
                at.session_state["job_id_input"] = job_id
                at.switch_page(PAGES["job"])
                at.run()
            shown[job_id] = at
        return shown[job_id]

    return run


def page_advice(at: AppTest) -> tuple[list, list]:
    assert not at.exception, at.exception
    items = [m.value for m in at.markdown if m.value.startswith("**")]
    return items, [c.value for c in at.code]


@pytest.mark.parametrize(
    ("job_id", "headlines"),
    [
        ("hung", ["Make a hang fail fast"]),
        ("nodefail", ["A node failure ended it: resubmit it only if Slurm did not requeue it"]),
    ],
)
def test_the_job_page_and_the_cli_give_the_same_advice(job_json, job_page, job_id, headlines):
    cli = job_json(job_id)["next_time"]
    items, settings = page_advice(job_page(job_id))

    assert [a["headline"] for a in cli] == headlines
    # the page shows the CLI's words as text (escaped Markdown: `md`)
    assert items == [f"**{md(a['headline'])}** — {md(a['reason'])}" for a in cli]
    assert settings == [f"#SBATCH {a['option']}" for a in cli if a["option"]]
    said = " ".join(f"{a['reason']} {a['option']}" for a in cli)
    assert "--time" not in said and "--cpus-per-gpu" not in said
    assert "interactive" not in said


def test_what_each_broken_job_is_told(job_json):
    [hung] = job_json("hung")["next_time"]
    [failed] = job_json("nodefail")["next_time"]

    assert "NCCL" in hung["reason"] and "watchdog" in hung["reason"]
    assert "because it hung, not because it needed more time" in hung["reason"]
    assert failed["option"] == "--requeue"
    assert "xid 79" in failed["reason"]


@pytest.mark.parametrize(("job_id", "diagnosis"), [("hung", "stalled"), ("nodefail", None)])
def test_the_job_page_shows_the_bottleneck_the_cli_diagnoses(job_json, job_page, job_id, diagnosis):
    cli_said = job_json(job_id)["diagnosis"]
    at = job_page(job_id)

    assert not at.exception, at.exception
    assert "Bottleneck" in [h.value for h in at.subheader]
    said = [a.value for a in [*at.warning, *at.info, *at.success] if a.value.startswith("`")]
    assert said == [f"`{cli_said['diagnosis']}` — {md(cli_said['advice'])}"]
    if diagnosis:
        assert cli_said["diagnosis"] == diagnosis
        [warning] = at.warning
        assert "NCCL_TIMEOUT" in warning.value.replace("\\", "")


def test_a_job_without_telemetry_is_not_called_sized_well(lake, monkeypatch):
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    text = runner.invoke(cli, ["job", "dark", "--lake", str(lake)])
    assert text.exit_code == 0, text.output
    next_time = text.output.split("Next Time")[1]
    assert "No advice: no GPU telemetry was attributed to this job" in next_time
    assert "sized well for" not in next_time

    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    for name in ("GPULEDGER_DASHBOARD_MANAGERS", "GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.session_state["job_id_input"] = "dark"
    at.switch_page(PAGES["job"])
    at.run()
    assert not at.exception, at.exception
    assert not [a.value for a in at.success if "Nothing to change" in a.value]
    assert [w.value for w in at.warning if w.value.startswith("No advice: no GPU telemetry")]


def test_a_job_cut_short_is_not_shown_in_green(job_json, job_page):
    # A preempted job whose figures call for no change: the page said so in a green "success"
    # box, as it does for a job sized well, while its words say that is unknown
    assert job_json("preempted")["next_time"] == []
    at = job_page("preempted")

    assert not at.exception, at.exception
    cut_short = "No change to its request follows from its figures, but it was preempted"
    assert not [a.value for a in at.success if a.value.startswith(cut_short)]
    assert [a.value for a in at.info if a.value.startswith(cut_short)]
