"""The Policy lab page (app/app_pages/policy_lab.py): a manager replays a proposal beside the
recorded policy and gets its calibration and the commands; anyone else is turned away. A
Kubernetes cluster is replayed under Kueue (the hand-built lake of tests/replay/kueue_lake.py,
whose replay is known by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.replay.kueue_lake import shared_kueue_lake

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
PAGE = "app_pages/policy_lab.py"
BOSS = "boss@example.org"


def open_lab(lake: Path, monkeypatch: pytest.MonkeyPatch, email: str | None, **state) -> AppTest:
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    if email is not None:
        monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", BOSS)
        monkeypatch.setenv("GPULEDGER_DASHBOARD_ALLOWED_DOMAINS", "example.org")
    at = AppTest.from_file(str(ENTRY), default_timeout=120)
    if email is not None:  # a verified sign-in of the site's domain, valid for years
        at.user = {"is_logged_in": True, "email": email, "email_verified": True, "exp": 4e9}
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(PAGE)
    return at.run()


def test_a_manager_replays_a_max_time_side_by_side(demo_lake, monkeypatch):
    at = open_lab(demo_lake, monkeypatch, BOSS, lab_maxtime="00:30:00", lab_partition="gpu")

    assert not at.exception
    assert at.title[0].value == "Policy lab"
    summary = at.dataframe[0].value
    assert list(summary.columns) == ["figure", "baseline", "proposal"]
    row = dict(zip(summary["figure"], summary["proposal"], strict=True))
    # a 30-minute MaxTime keeps the longer-asking jobs pending (Slurm's PartitionTimeLimit)
    assert row["jobs left queued at the end (the baseline started them)"] > 0
    assert summary["proposal"][0] < summary["baseline"][0]  # fewer jobs start
    assert any("rank correlation" in m.value for m in at.markdown)
    assert "scontrol -M sim update PartitionName=gpu MaxTime=00:30:00" in at.code[0].value


def test_open_access_counts_as_a_manager_and_a_bad_setting_is_one_line(demo_lake, monkeypatch):
    at = open_lab(demo_lake, monkeypatch, None, lab_extra="bf_window=soon")

    assert not at.exception
    assert "bf_window=soon: not a number" in at.error[0].value


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("partition.gpuu.MaxTime=01:00:00", "the cluster has no partition 'gpuu'"),
        ("node.no-such-node.State=DRAIN", "the cluster has no node 'no-such-node'"),
    ],
)
def test_a_setting_naming_what_the_cluster_lacks_is_said_not_replayed_as_no_change(
    demo_lake, monkeypatch, extra, said
):
    """The CLI refused these; the lab replayed them as nothing and showed the baseline's
    figures as the proposal's."""
    at = open_lab(demo_lake, monkeypatch, None, lab_extra=extra)

    assert not at.exception
    assert [e.value for e in at.error] and said in at.error[0].value, [e.value for e in at.error]
    assert not at.dataframe


def test_the_calibration_of_a_single_job_says_what_it_cannot_compare(tmp_path, monkeypatch):
    """One job started in both runs: its rank correlation printed "nan"."""
    from tests.marts import rows as r

    lake = tmp_path / "lake"
    r.build_lake(
        lake,
        samples=r.samples(range(0, 7200, 30), gpu_util_pct=50.0),
        jobs=[r.job("j1", 0.0, 7200.0, time_limit_s=14400)],
        job_gpus=[r.job_gpu("j1", 0.0, 7200.0)],
        gpus=[r.gpu()],
    ).close()

    at = open_lab(lake, monkeypatch, None)

    assert not at.exception, at.exception
    [calibration] = [m.value for m in at.markdown if "rank correlation" in m.value]
    assert "nan" not in calibration
    assert "correlation **—** (too few jobs to compare)" in calibration


def test_a_non_manager_does_not_see_the_lab(demo_lake, names, monkeypatch):
    at = open_lab(demo_lake, monkeypatch, f"{names['user']}@example.org")

    assert not at.exception
    assert "for managers" in at.info[0].value
    assert not at.dataframe and not at.code


def test_a_job_the_proposal_delays_past_the_end_of_the_data_still_starts(demo_lake, monkeypatch):
    # a 4-GPU cap on speech delays its jobs; two then start only after the end of the data,
    # which the replay goes on past (as `gpuledger whatif compare` does): they count as
    # started, with their wait, not as never started
    at = open_lab(demo_lake, monkeypatch, BOSS, lab_account="speech", lab_cap=4)

    assert not at.exception
    jobs = int(at.markdown[0].value.split("**")[1].split()[0].replace(",", ""))
    summary = at.dataframe[0].value
    assert summary["figure"][0] == "jobs started"
    assert summary["baseline"][0] == summary["proposal"][0] == jobs
    assert "assoc.speech.GrpTRES=gres/gpu=4" in at.markdown[0].value
    assert any("end of the data" in c.value for c in at.caption)


@pytest.fixture(scope="module")
def kueue_lake(tmp_path_factory) -> Path:
    from detectors.recommend.run import recommend
    from detectors.recommend.store import write_recommendations
    from warehouse.connection import connect
    from warehouse.lake import Lake

    root = shared_kueue_lake(tmp_path_factory)
    with connect(root) as con:
        write_recommendations(Lake.at(root), recommend(con))
    return root


def test_raising_a_clusterqueues_nominal_quota_admits_its_waiting_workload(kueue_lake, monkeypatch):
    # cq-b at 8 GPUs: b1 (submitted 00:10) fits beside a1 and a2 (8 of the cohort's 12) at
    # once instead of waiting 6,600 s for them to end
    at = open_lab(kueue_lake, monkeypatch, BOSS, lab_cq="cq-b", lab_nominal="8")

    assert not at.exception
    assert "3 GPU workloads" in at.markdown[0].value
    assert "`clusterqueue.cq-b.nominalQuota=8`" in at.markdown[0].value
    summary = at.dataframe[0].value
    row = dict(zip(summary["figure"], summary["proposal"], strict=True))
    assert row["workloads admitted"] == 3 and row["workloads preempted"] == 0
    waits = at.dataframe[1].value
    cq_b = waits[(waits["group"] == "account") & (waits["key"] == "cq-b")]
    assert list(cq_b["base_p50_s"]) == [6600.0] and list(cq_b["new_p50_s"]) == [0.0]
    assert any("rank correlation **1.000**" in m.value for m in at.markdown)
    assert at.code[0].value == (
        "kubectl get clusterqueue cq-b -o json | jq '(.spec.resourceGroups[].flavors[] | "
        'select(.name == "h100") | .resources[] | select(.name == "nvidia.com/gpu"))'
        '.nominalQuota = "8"\' | kubectl replace -f -'
    )


def test_a_kueue_recommendation_is_replayed_with_its_apply_lines_and_its_yaml(
    kueue_lake, monkeypatch
):
    at = open_lab(kueue_lake, monkeypatch, BOSS, lab_rec="gpu_cap: account=team-a")

    assert not at.exception
    summary = at.dataframe[0].value
    assert summary["figure"][0] == "workloads admitted"
    # capping team-a: a2 waits 7,200 s for a1 instead of borrowing cq-b's quota
    waits = at.dataframe[1].value
    cq_a = waits[(waits["group"] == "account") & (waits["key"] == "cq-a")]
    # (p95 of a1's and a2's waits: the nearest of the two)
    assert list(cq_a["base_p95_s"]) == [0.0] and list(cq_a["new_p95_s"]) == [7200.0]
    assert 'borrowingLimit = "0"' in at.code[0].value
    assert "kind: ClusterQueue" in at.code[1].value  # the recommendation's own YAML


def test_a_bad_kueue_setting_is_one_line(kueue_lake, monkeypatch):
    at = open_lab(kueue_lake, monkeypatch, BOSS, lab_cq="cq-a", lab_borrowing="lots")

    assert not at.exception
    assert "borrowingLimit=lots: expected a whole number of GPUs, or none" in at.error[0].value
