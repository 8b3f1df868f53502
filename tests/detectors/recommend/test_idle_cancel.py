"""Idle-cancel replay on a hand-made lake: recovered GPU-hours, jobs hit and false kills by hand."""

from __future__ import annotations

import pytest
import yaml

from detectors.recommend import RecommendConfig
from detectors.recommend.config import IdleCancelConfig
from detectors.recommend.run import recommend
from tests.detectors.recommend.lake import NOW, busy_samples, recs_of
from tests.detectors.recommend.shared_lakes import shared_lake
from tests.marts import rows as r
from warehouse.lake import Lake

H = 3600.0


def idle_lake(root):
    """Four jobs (30-s samples, 5-minute buckets):

    a: 2 GPUs, [0, 6h): busy 1 h, then both GPUs idle for 5 h to the end.
    b: 1 GPU, [0, 4h): idle 2.5 h, then busy 1.5 h (a false kill for any cancel <= 150 min).
    c: 1 GPU, [0, 2h): busy throughout.
    d: 1 GPU, [0, 3h): never active.
    """
    samples = (
        busy_samples([(0, H, 0.8), (H, 6 * H, 0.0)], gpu_index=0)
        + busy_samples([(0, H, 0.5), (H, 6 * H, 0.0)], gpu_index=1)
        + busy_samples([(0, 2.5 * H, 0.0), (2.5 * H, 4 * H, 0.9)], gpu_index=2)
        + busy_samples([(0, 2 * H, 0.7)], gpu_index=3)
        + busy_samples([(0, 3 * H, 0.0)], gpu_index=4)
    )
    jobs = [
        r.job("a", 0, 6 * H, gpus=2),
        r.job("b", 0, 4 * H),
        r.job("c", 0, 2 * H),
        r.job("d", 0, 3 * H),
    ]
    job_gpus = [
        r.job_gpu("a", 0, 6 * H, gpu_index=0),
        r.job_gpu("a", 0, 6 * H, gpu_index=1),
        r.job_gpu("b", 0, 4 * H, gpu_index=2),
        r.job_gpu("c", 0, 2 * H, gpu_index=3),
        r.job_gpu("d", 0, 3 * H, gpu_index=4),
    ]
    return r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """`idle_lake`, built once per run (test_replayed_kinds.py reads it too): this file's copy."""
    return shared_lake(tmp_path_factory, "idle-cancel", idle_lake)


FIGURES = (
    "jobs_warned",
    "jobs_cancelled",
    "false_kills",
    "false_kill_rate",
    "gpu_h_recovered",
    "gpu_h_disrupted",
    "gain_gpu_h",
)


def figures(candidate: dict) -> dict:
    return {k: candidate[k] for k in FIGURES}


def run(con, **idle):
    config = RecommendConfig(idle_cancel=IdleCancelConfig(**idle))
    return recs_of(recommend(con, config, NOW, kinds=("idle_cancel_policy",)), "idle_cancel_policy")


def test_the_replay_of_each_candidate_by_hand(con):
    [rec] = run(con, max_false_kill_rate=1.0)
    by_pair = {(c["warn_minutes"], c["cancel_minutes"]): c for c in rec["evidence"]["candidates"]}

    # (60, 120): a idle from 1 h -> cancelled at 3 h, frees 2 GPUs x 3 h = 6 GPU-h.
    # b idle from 0 -> cancelled at 2 h, frees 1 x 2 h = 2 GPU-h, but b works again at 2.5 h:
    # a false kill, 2 GPU-h disrupted. d idle from 0 -> cancelled at 2 h, frees 1 GPU-h.
    assert figures(by_pair[(60, 120)]) == pytest.approx(
        {
            "jobs_warned": 3,
            "jobs_cancelled": 3,
            "false_kills": 1,
            "false_kill_rate": 1 / 3,
            "gpu_h_recovered": 9.0,
            "gpu_h_disrupted": 2.0,
            "gain_gpu_h": 7.0,
        },
        abs=1e-6,
    )
    assert by_pair[(60, 120)]["false_kill_jobs"] == ["b"]
    # (15, 60): a cancelled at 2 h (2 GPUs x 4 h = 8 GPU-h), b at 1 h (1 x 3 h = 3 GPU-h, a
    # false kill: it works again at 2.5 h), d at 1 h (1 x 2 h = 2); all three warned
    assert figures(by_pair[(15, 60)]) == pytest.approx(
        {
            "jobs_warned": 3,
            "jobs_cancelled": 3,
            "false_kills": 1,
            "false_kill_rate": 1 / 3,
            "gpu_h_recovered": 13.0,
            "gpu_h_disrupted": 3.0,
            "gain_gpu_h": 10.0,
        },
        abs=1e-6,
    )
    assert by_pair[(15, 60)]["false_kill_jobs"] == ["b"]
    # every job is alice's batch job: one user hit, no interactive session cancelled
    assert {(c["users_hit"], c["interactive_cancelled"]) for c in by_pair.values()} == {(1, 0)}
    # (120, 240): only a (idle 5 h) reaches 240 min: cancelled at 5 h, 2 GPU-h, no false kill;
    # d (idle 3 h) and b (2.5 h) are only warned.
    assert figures(by_pair[(120, 240)]) == pytest.approx(
        {
            "jobs_warned": 3,
            "jobs_cancelled": 1,
            "false_kills": 0,
            "false_kill_rate": 0.0,
            "gpu_h_recovered": 2.0,
            "gpu_h_disrupted": 0.0,
            "gain_gpu_h": 2.0,
        }
    )
    # (240, 300): a (idle 5 h) is warned and cancelled at 6 h = its end: nothing recovered,
    # and it was never active again (no false kill); b and d are not even warned.
    assert figures(by_pair[(240, 300)]) == pytest.approx(
        {
            "jobs_warned": 1,
            "jobs_cancelled": 1,
            "false_kills": 0,
            "false_kill_rate": 0.0,
            "gpu_h_recovered": 0.0,
            "gpu_h_disrupted": 0.0,
            "gain_gpu_h": 0.0,
        },
        abs=1e-6,
    )
    # with false kills allowed the best gain wins: (15, 60)
    assert rec["evidence"]["chosen"]["cancel_minutes"] == 60
    assert rec["expected_gain_gpu_h"] == pytest.approx(10.0)


def test_the_bucket_width_replayed_is_the_lakes_not_the_configured_one(con):
    """The lake's buckets are 300 s; a configuration saying 600 (set for another lake) replays
    the same runs: read as 600-s buckets, each 300-s bucket was a run of its own, half long."""
    [default] = run(con, max_false_kill_rate=1.0)
    [other] = run(con, max_false_kill_rate=1.0, bucket_s=600)

    assert other["evidence"]["candidates"] == default["evidence"]["candidates"]
    assert other["expected_gain_gpu_h"] == pytest.approx(10.0)


def test_the_false_kill_budget_picks_the_safe_candidate(con):
    [rec] = run(con)  # at most 5 % false kills: only (120, 240) and (240, 300) qualify

    assert rec["evidence"]["chosen"]["cancel_minutes"] == 240
    assert rec["expected_gain_gpu_h"] == pytest.approx(2.0)
    assert rec["scope"] == "cluster" and rec["target"] == "slurm"
    assert "idle_after_minutes = 120" in rec["config"]
    assert "sliding_cancel_minutes: 240" in rec["config"]
    # Job Defense Shield's entry: the partitions replayed by name (it has no wildcard), the
    # files and cache folder its sliding window requires, and only fully idle jobs cancelled
    jds = rec["config"].split("# Job Defense Shield", 1)[1].split("\n", 1)[1]
    entry = yaml.safe_load(jds)["cancel-zero-gpu-jobs-1"]
    assert entry["cluster"] == "della"
    assert entry["partitions"] == ["gpu"]
    assert (entry["sliding_warning_minutes"], entry["sliding_cancel_minutes"]) == (120, 240)
    assert {"email_file_sliding_warning", "email_file_sliding_cancel", "jobid_cache_path"} <= set(
        entry
    )
    assert entry["gpu_frac_threshold"] <= 1 / 8  # a job with 1 of 8 GPUs at work is spared
    assert rec["risk"].startswith("0 of 1 cancelled job was active again")


def test_a_job_never_active_is_not_a_false_kill(con):
    [rec] = run(con, candidates=((60, 120),), max_false_kill_rate=0.5)

    assert rec["evidence"]["chosen"]["false_kill_jobs"] == ["b"]  # not d


def test_nothing_to_recover_gives_no_recommendation(con):
    assert run(con, candidates=((240, 300),)) == []


def test_the_same_recommendation_keeps_its_id(con):
    first = run(con)[0]["rec_id"]
    again = run(con, max_false_kill_rate=1.0)[0]["rec_id"]  # other figures, same policy kind

    assert first == again


def test_an_empty_lake_recommends_nothing(tmp_path):
    con = r.build_lake(tmp_path)

    assert recommend(con, RecommendConfig(), NOW).num_rows == 0


def test_storing_twice_keeps_one_row_per_recommendation_and_its_first_time(tmp_path):
    import datetime as dt

    from detectors.recommend.store import read_recommendations, write_recommendations
    from warehouse.connection import connect

    root = tmp_path / "lake"
    idle_lake(root)
    con = connect(root)
    config = RecommendConfig(idle_cancel=IdleCancelConfig(max_false_kill_rate=1.0))
    first = recommend(con, config, NOW, kinds=("idle_cancel_policy",))
    later = recommend(con, config, NOW + dt.timedelta(days=1), kinds=("idle_cancel_policy",))

    assert write_recommendations(Lake.at(root), first) == 1
    assert write_recommendations(Lake.at(root), later) == 1
    [stored] = read_recommendations(Lake.at(root)).to_pylist()
    assert stored["rec_id"] == first.column("rec_id")[0].as_py()
    assert stored["created_ts"] == NOW  # first made at NOW, found again a day later
    assert connect(root).sql("SELECT count(*) FROM recommendations").fetchall() == [(1,)]
    # a run that no longer makes it removes it
    assert (
        write_recommendations(Lake.at(root), recommend(con, config, NOW, kinds=()), ["della"]) == 0
    )
    assert read_recommendations(Lake.at(root)).num_rows == 0


def test_a_hung_job_is_not_counted_since_the_rule_proposed_would_never_cancel_it(tmp_path):
    """h: 1 GPU, [0, 5h): no SM activity but GPU_UTIL 100 % (hung) for 5 h. z: 1 GPU,
    [0, 3h): no activity and GPU_UTIL 0 % for 3 h. Job Defense Shield's cancel-zero-gpu-jobs
    reads utilization: it cancels z at 2 h (1 GPU-h) and never h (H2)."""
    samples = busy_samples(
        [(0, 5 * H, 0.0)], gpu_index=0, sm_active=0.0, gpu_util_pct=100.0
    ) + busy_samples([(0, 3 * H, 0.0)], gpu_index=1, sm_active=0.0, gpu_util_pct=0.0)
    jobs = [r.job("h", 0, 5 * H), r.job("z", 0, 3 * H)]
    job_gpus = [r.job_gpu("h", 0, 5 * H, gpu_index=0), r.job_gpu("z", 0, 3 * H, gpu_index=1)]
    con = r.build_lake(tmp_path, samples=samples, jobs=jobs, job_gpus=job_gpus)
    [rec] = run(con, candidates=((60, 120),))
    chosen = rec["evidence"]["chosen"]

    assert (chosen["jobs_warned"], chosen["jobs_cancelled"]) == (1, 1)
    assert rec["expected_gain_gpu_h"] == pytest.approx(1.0)  # z only: 1 GPU × (3 h - 2 h)
    assert "hung GPUs" in rec["evidence"]["idle_is"]
