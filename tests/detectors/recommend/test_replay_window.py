"""The window a replay records is the span the lake's data cover, not the run's clock."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from detectors.recommend import RecommendConfig
from detectors.recommend.run import cluster_facts, recommend
from detectors.replay.workload import load_workload
from tests.detectors.recommend.lake import recs_of
from tests.marts import rows as r
from warehouse import queries

H = 3600.0
LATE = r.T0 + dt.timedelta(days=30)  # `detect` run a month after the data end


def jobs():
    """Ten completed jobs (alice asks 24 h, runs 1-3 h) over [1 h, 6 h) and one still running
    (no end) from 2 h; the GPU's samples end at 8 h."""
    out = [
        r.job(f"a{i}", H + i * 60, H + i * 60 + hours * H, time_limit_s=int(24 * H))
        for i, hours in enumerate([1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
    ]
    out.append(r.job("run", 2 * H, None, state="RUNNING", time_limit_s=int(48 * H)))
    return out


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    samples = r.samples(range(int(H), int(8 * H), 30), engine_active=1.0)
    return r.build_lake(tmp_path_factory.mktemp("lake"), jobs=jobs(), samples=samples)


def test_a_running_job_ends_where_the_data_end_not_at_the_run_time(con):
    since = LATE - dt.timedelta(days=60)
    [facts] = cluster_facts(con, since, LATE)
    assert facts.data_start_e == pytest.approx(r.at(H).timestamp())
    # the running job ends with the last sample, after every completed job's end (6 h 9 min)
    assert facts.data_end_e == pytest.approx(r.at(8 * H).timestamp())
    assert facts.data_h == pytest.approx(7.0)


def test_the_recorded_window_is_the_data_span(con):
    [rec, *_] = recs_of(
        recommend(con, RecommendConfig(), LATE, kinds=("time_limit",)), "time_limit"
    )
    ev = rec["evidence"]
    assert dt.datetime.fromisoformat(ev["replayed_from"]) == r.at(H)
    assert dt.datetime.fromisoformat(ev["replayed_until"]) == r.at(8 * H)


def test_without_samples_a_running_job_ends_at_the_last_job_event(tmp_path):
    con = r.build_lake(tmp_path, jobs=jobs())
    [facts] = cluster_facts(con, LATE - dt.timedelta(days=60), LATE)
    # the last job end: a8/a9 ran 5 h from 1 h + 8 min / 9 min
    assert facts.data_end_e == pytest.approx(r.at(H + 9 * 60 + 5 * H).timestamp())


def test_without_samples_a_running_job_ends_when_its_record_was_collected(tmp_path):
    # the scheduler's last look at the cluster (updated_ts) was at 10 h, the running job still
    # running then: every recommendation and the replay count it to 10 h, whatever `now` is
    collected = [
        row | {"updated_ts": r.at(10 * H)} if row["job_id"] == "run" else row for row in jobs()
    ]
    con = r.build_lake(tmp_path, jobs=collected)
    for now in (LATE, LATE + dt.timedelta(days=300)):
        [facts] = cluster_facts(con, LATE - dt.timedelta(days=60), now)
        assert facts.data_end_e == pytest.approx(r.at(10 * H).timestamp())
        window = queries.run(con, "recommend/window_jobs", since=r.T0, until=now)
        [end] = window.filter(pl.col("job_id") == "run")["end_e"].to_list()
        assert end == pytest.approx(r.at(10 * H).timestamp())
    w = load_workload(con, r.CLUSTER)
    assert w.horizon_e == pytest.approx(r.at(10 * H).timestamp())
    [running] = [i for i, job_id in enumerate(w.job_id) if job_id == "run"]
    assert w.run_s[running] == pytest.approx(8 * H)
