"""Time-limit recommendations on hand-made jobs: quantiles, limits, released GPU-hours."""

from __future__ import annotations

import pytest

from detectors.recommend import RecommendConfig
from detectors.recommend.config import TimeLimitConfig
from detectors.recommend.run import recommend
from tests.detectors.recommend.lake import NOW, reading, recs_of
from tests.marts import rows as r

H = 3600.0


def jobs():
    """alice: 5 × 1 GPU, limit 24 h, ran 1, 1, 2, 2, 3 h. bob: 5 × 2 GPUs, limit 4 h, ran
    3, 3, 3.5, 3.5, 4 h. carol: one job in partition debug (too few for a proposal)."""
    out = []
    for i, hours in enumerate([1, 1, 2, 2, 3]):
        out.append(r.job(f"a{i}", i * 60, i * 60 + hours * H, time_limit_s=int(24 * H)))
    for i, hours in enumerate([3, 3, 3.5, 3.5, 4]):
        out.append(
            r.job(f"b{i}", i * 60, i * 60 + hours * H, user="bob", gpus=2, time_limit_s=int(4 * H))
        )
    out.append(r.job("c0", 0, H, user="carol", partition="debug", time_limit_s=int(2 * H)))
    out.append(r.job("f0", 0, 60, state="FAILED", time_limit_s=int(48 * H)))  # not COMPLETED
    return out


@pytest.fixture(scope="module")
def jobs_lake(tmp_path_factory):
    """The lake of `jobs()`, built once per module: the tests only read it (recommend)."""
    root = tmp_path_factory.mktemp("lake")
    r.build_lake(root, jobs=jobs())
    return root


@pytest.fixture(scope="module")
def recs(jobs_lake):
    con = reading(jobs_lake)
    return recs_of(recommend(con, RecommendConfig(), NOW, kinds=("time_limit",)), "time_limit")


def test_one_partition_and_one_user_get_a_proposal(recs):
    assert [rec["scope"] for rec in recs] == ["partition=gpu", "user=alice"]


def test_partition_default_and_maximum_by_hand(recs):
    rec = recs[0]
    ev = rec["evidence"]

    # gpu's 10 run times: 1 1 2 2 3 3 3 3.5 3.5 4 h; p90 (next higher rank) = 4 h;
    # × 1.2 = 4.8 h, rounded up to 15 min = 5 h; MaxTime: 4 h × 1.2 up to an hour = 5 h
    assert ev["runtime_p90_s"] == 4 * H
    assert ev["default_time_s"] == 5 * H
    assert ev["max_time_s"] == 5 * H
    # unused limit: alice 23+23+22+22+21 = 111, bob 2 × (1+1+0.5+0.5+0) = 6
    assert ev["unused_limit_gpu_h"] == pytest.approx(117.0)
    # released by MaxTime: alice's 5 jobs asked 24 h, more than MaxTime 5 h: 5 × (24 - 5); and
    # f0 (failed after a minute) asked 48 h: 48 - 5
    assert rec["expected_gain_gpu_h"] == pytest.approx(95.0 + 43.0)
    assert ev["jobs_over_max_time"] == 6
    assert ev["jobs_over_new_limit"] == 0
    assert (
        "scontrol -M della update PartitionName=gpu DefaultTime=05:00:00 MaxTime=05:00:00"
        in rec["config"]
    )
    # slurm.conf is edited in place, never appended to: a second PartitionName=gpu line stops
    # slurmctld ("duplicate entry for partition gpu", seen on the live 22.05 cluster)
    assert "# line set DefaultTime=05:00:00 MaxTime=05:00:00" in rec["config"]
    assert not [line for line in rec["config"].splitlines() if line.startswith("PartitionName=")]


def test_user_hint_by_hand(recs):
    rec = recs[1]
    ev = rec["evidence"]

    # alice's p90 = 3 h; × 1.2 = 3.6 h -> 3:45; median run/limit = 2/24
    assert ev["time_hint_s"] == 3.75 * H
    assert ev["runtime_over_limit_ratio_median"] == pytest.approx(2 / 24, abs=1e-4)
    assert rec["expected_gain_gpu_h"] == pytest.approx(5 * (24 - 3.75))
    assert "#SBATCH --time=03:45:00" in rec["config"]
    # bob uses 87.5 % of his limit: no hint


def test_kueue_clusters_get_a_max_exec_time_label(tmp_path):
    con = r.build_lake(tmp_path, jobs=[j | {"source": "kubernetes"} for j in jobs()])
    recs = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("time_limit",)), "time_limit")

    assert {rec["target"] for rec in recs} == {"kueue"}
    assert 'kueue.x-k8s.io/max-exec-time-seconds: "18000"' in recs[0]["config"]


def test_every_recommender_runs_on_a_lake_of_jobs_without_telemetry(jobs_lake):
    con = reading(jobs_lake)
    table = recommend(con, RecommendConfig(), NOW)

    # only what run times alone support: time limits (GPU caps need the cluster's GPU count)
    assert set(table.column("kind").to_pylist()) <= {"time_limit", "fairshare_weight"}


def test_an_old_lake_is_judged_as_of_its_own_end(jobs_lake):
    import datetime as dt

    con = reading(jobs_lake)
    much_later = NOW + dt.timedelta(days=90)  # far past the 28-day lookback
    table = recommend(con, RecommendConfig(), much_later, kinds=("time_limit",))

    assert sorted(table.column("scope").to_pylist()) == ["partition=gpu", "user=alice"]


def test_a_new_default_time_gains_nothing_from_jobs_that_set_their_own_limit(tmp_path):
    """DefaultTime applies only to jobs submitted without --time: limits of 9 to 10 h, none
    over the new MaxTime (8 h × 1.2 -> 10 h), are the jobs' own requests, so a new
    DefaultTime (median 2 h × 1.2 -> 2:30) releases nothing and no partition change is
    proposed (H1)."""
    runs = [1, 1, 1, 1, 2, 2, 2, 3, 3, 8]
    out = [
        r.job(f"j{i}", i * 60, i * 60 + hours * H, time_limit_s=int((9 + i / 9) * H))
        for i, hours in enumerate(runs)
    ]
    con = r.build_lake(tmp_path, jobs=out)
    config = RecommendConfig(time_limit=TimeLimitConfig(quantile=0.5))
    recs = recs_of(recommend(con, config, NOW, kinds=("time_limit",)), "time_limit")

    assert [rec["scope"] for rec in recs] == []


def test_the_partition_gain_counts_only_what_max_time_takes_back(tmp_path):
    """One job asked 30 h, nine asked 5 h; all ran 1-4 h. MaxTime (4 h × 1.2 -> 5 h) takes
    back only the 30-h job's 25 h. DefaultTime (median 1 h × 1.2 -> 1:15) would release more
    only from jobs that took the default, which the lake cannot tell: evidence, not gain."""
    runs = [1, 1, 1, 1, 1, 1, 2, 3, 4, 4]
    out = [
        r.job(f"j{i}", i * 60, i * 60 + hours * H, time_limit_s=int((30 if i == 0 else 5) * H))
        for i, hours in enumerate(runs)
    ]
    con = r.build_lake(tmp_path, jobs=out)
    config = RecommendConfig(time_limit=TimeLimitConfig(quantile=0.5))
    [rec] = [
        rec
        for rec in recs_of(recommend(con, config, NOW, kinds=("time_limit",)), "time_limit")
        if rec["scope"] == "partition=gpu"
    ]
    ev = rec["evidence"]

    assert ev["default_time_s"] == 1.25 * H and ev["max_time_s"] == 5 * H
    assert rec["expected_gain_gpu_h"] == pytest.approx(25.0)
    # had every job taken the default: the six 1-h runs, (30 - 1.25) + 5 × (5 - 1.25)
    assert ev["default_time_gpu_h_if_all_default"] == pytest.approx(28.75 + 18.75)
    assert ev["jobs_over_max_time"] == 1
    assert rec["risk"].startswith("1 of the 10 jobs that ended asked for more than MaxTime 05:00")
    assert (
        "4 ran longer than the new default 01:15:00: those submitted without --time"
        in (rec["risk"])
    )


def test_max_time_is_above_every_run_that_ended_whatever_its_state(tmp_path):
    # The probe: MaxTime came from the completed jobs alone, and its risk said "none ran
    # longer" beside timed-out jobs of 25-33 h. t0 timed out after 6 h: MaxTime 6 × 1.2 = 7.2,
    # up to 8 h (the completed jobs' 4 h gave 5 h); the default still follows completed runs.
    timed_out = r.job("t0", 0, 6 * H, user="bob", state="TIMEOUT", time_limit_s=int(6 * H))
    r.build_lake(tmp_path, jobs=[*jobs(), timed_out])
    found = recommend(reading(tmp_path), RecommendConfig(), NOW, kinds=("time_limit",))
    [rec] = [x for x in recs_of(found, "time_limit") if x["scope"] == "partition=gpu"]

    assert rec["evidence"]["max_time_s"] == 8 * H
    assert rec["evidence"]["default_time_s"] == 5 * H
    assert "of the 12 jobs that ended asked for more than MaxTime 08:00:00" in rec["risk"]
