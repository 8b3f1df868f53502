"""`predict(con, lake, now)` on a small simulated lake: trained models give predicted findings
with stable ids, nothing from after `now`, and nothing at all before any model is trained."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from collector.sim import SimConfig, simulate
from detectors.findings import FINDINGS_SCHEMA
from detectors.models import predict, producer
from detectors.models.store import load
from detectors.models.training import MODEL_NAMES, load_data, train_all
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect
from warehouse.lake import Lake

pytestmark = pytest.mark.slow
NOW = dt.datetime(2026, 11, 6, tzinfo=dt.UTC)
# The early-waste models learn from the jobs that had ended by then: the jobs after are theirs
# to predict (a model predicting the jobs it learnt from repeats its lesson: no finding).
EARLY_TRAINED = dt.datetime(2026, 11, 4, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from detectors.models import as_of
    from detectors.models.early_waste import EarlyWasteConfig
    from detectors.models.training import _train_early_waste

    root = tmp_path_factory.mktemp("lake")
    simulate(SimConfig(gpus=16, days=3, seed=11, failure_rate=40.0), Lake.at(root))
    con = connect(root)
    attribute(con, root, AttributionConfig())
    data = load_data(con)
    trained = train_all(data, Lake.at(root), NOW)
    assert set(trained.cards) | set(trained.skipped) >= {"failing_gpu", "lemon_node"}
    _train_early_waste(as_of(data, EARLY_TRAINED), Lake.at(root), EARLY_TRAINED, EarlyWasteConfig())
    return root


def test_nothing_is_predicted_before_a_model_is_trained(tmp_path: Path) -> None:
    simulate(SimConfig(gpus=8, days=1, seed=3), Lake.at(tmp_path))
    table = predict(connect(tmp_path), Lake.at(tmp_path), NOW)
    assert table.num_rows == 0 and table.schema == FINDINGS_SCHEMA


def test_trained_models_are_stored_with_their_window(lake: Path) -> None:
    stored = [n for n in MODEL_NAMES if (lake / "_state" / "models" / f"{n}.json").is_file()]
    assert "failing_gpu" in stored and "early_waste_30m" in stored
    card, _ = load(Lake.at(lake), "failing_gpu")
    assert card.window_start == "2026-11-02T00:00:00+00:00"
    assert card.clusters == ("sim",) and card.threshold is not None
    assert "test_recall_1h" in card.metrics


def test_predictions_are_findings_raised_no_later_than_now(lake: Path) -> None:
    now = dt.datetime(2026, 11, 4, 12, tzinfo=dt.UTC)
    table = predict(connect(lake), Lake.at(lake), now)
    assert table.schema == FINDINGS_SCHEMA
    frame = pl.DataFrame(table)
    assert frame.height > 0
    assert frame["predicted"].all()
    assert (frame["detected_ts"] <= now).all()
    assert (frame["score"].is_between(0, 1)).all()
    assert set(frame["detector"].unique()) <= {
        "failing_gpu_model",
        "early_waste_model_15m",
        "early_waste_model_30m",
        "runtime_quantiles_model",
        "lemon_node_model",
    }


def test_predicting_again_gives_the_same_ids(lake: Path) -> None:
    first = pl.DataFrame(predict(connect(lake), Lake.at(lake), NOW))
    again = pl.DataFrame(predict(connect(lake), Lake.at(lake), NOW))
    assert first["finding_id"].n_unique() == first.height
    assert sorted(first["finding_id"]) == sorted(again["finding_id"])


def test_a_later_run_keeps_the_ids_of_episodes_it_saw_before(lake: Path) -> None:
    early = pl.DataFrame(
        predict(connect(lake), Lake.at(lake), dt.datetime(2026, 11, 4, 12, tzinfo=dt.UTC))
    )
    late = pl.DataFrame(predict(connect(lake), Lake.at(lake), NOW))
    early_jobs = early.filter(pl.col("detector").str.starts_with("early_waste"))
    late_ids = set(late["finding_id"])
    assert early_jobs.height > 0
    assert set(early_jobs["finding_id"]) <= late_ids


def test_detect_since_keeps_the_predictions_about_what_was_still_going_then(lake: Path) -> None:
    # the producer dropped every finding detected before `since`: a job predicted wasteful
    # 15 minutes in, still running at `since`, lost its finding for good
    from detectors.findings import seen_since

    since = dt.datetime(2026, 11, 4, 6, tzinfo=dt.UTC)
    rows = pl.DataFrame(seen_since(producer(Lake.at(lake))(connect(lake), NOW, since), since))
    everything = pl.DataFrame(predict(connect(lake), Lake.at(lake), NOW))
    going = pl.col("end_ts").is_null() | (pl.col("end_ts") >= since)
    assert sorted(rows["finding_id"]) == sorted(everything.filter(going)["finding_id"])
    before = rows.filter(pl.col("detected_ts") < since)
    assert before.filter(pl.col("detector").str.starts_with("early_waste")).height > 0
    assert rows.height < everything.height  # what ended before `since` is left out


def test_no_early_waste_finding_is_about_a_job_the_model_learnt_from(
    lake: Path, tmp_path: Path
) -> None:
    # a model trained on the lake flagged 98 of 100 jobs whose outcome it had learnt, as
    # predictions "100 % chance ..."
    copy = always_wasteful(lake, tmp_path / "lake")
    card, _ = load(Lake.at(copy), "early_waste_30m")
    rows, learnt = _early_findings_on_jobs(copy, card.window_end or "")
    assert rows.filter(learnt).is_empty()
    assert (rows["end_ts_job"] > EARLY_TRAINED).all() or rows["end_ts_job"].is_null().any()


def _early_findings_on_jobs(copy: Path, window_end: str) -> tuple[pl.DataFrame, pl.Expr]:
    """The 30-minute early-waste findings `predict` raises on `copy`, each with its job's start
    and end, and whether that job is one the model learnt from (ended by its training, started
    inside its window)."""
    found = pl.DataFrame(predict(connect(copy), Lake.at(copy), NOW)).filter(
        pl.col("detector") == "early_waste_model_30m"
    )
    jobs = pl.DataFrame(
        connect(copy).sql("SELECT job_id, start_ts, end_ts FROM jobs_latest").arrow()
    )
    rows = found.join(jobs, left_on="subject_id", right_on="job_id", suffix="_job")
    learnt = (pl.col("end_ts_job") <= EARLY_TRAINED) & (
        pl.col("start_ts_job") <= dt.datetime.fromisoformat(window_end)
    )
    assert rows.height == found.height > 0
    return rows, learnt


def test_a_card_stamped_before_its_window_still_never_predicts_a_job_it_learnt_from(
    lake: Path, tmp_path: Path
) -> None:
    # `train --now 1970-01-01` stamped a card before its own window; the exclusion of the jobs
    # a model learnt from read the stamp, and the model "predicted" 114 jobs it had learnt
    copy = always_wasteful(lake, tmp_path / "lake")
    path = copy / "_state" / "models" / "early_waste_30m.json"
    card = json.loads(path.read_text())
    card["trained_ts"] = "1970-01-01T00:00:00+00:00"
    path.write_text(json.dumps(card))
    rows, learnt = _early_findings_on_jobs(copy, card["window_end"])
    assert rows.filter(learnt).is_empty()


def test_model_findings_end_inside_the_data(lake: Path) -> None:
    # a failing-GPU alarm ended a day (its horizon) after its last hour, past the data's end,
    # and `gpuledger check` failed on it; a run-time finding stayed open once its job ended
    con = connect(lake)
    (data_end,) = con.execute("SELECT max(data_end) FROM data_extent").fetchone() or (None,)
    found = pl.DataFrame(predict(con, Lake.at(lake), NOW))
    assert found.filter(pl.col("detector") == "failing_gpu_model").height > 0
    assert (
        found["end_ts"].null_count()
        == found.filter(
            pl.col("detector").str.starts_with("early_waste") & pl.col("end_ts").is_null()
        ).height
    )
    assert (found["end_ts"].drop_nulls() <= data_end).all()
    assert (
        found["end_ts"].drop_nulls() >= found.filter(pl.col("end_ts").is_not_null())["start_ts"]
    ).all()


def test_a_failing_gpu_model_with_no_held_out_failure_raises_no_finding(
    lake: Path, tmp_path: Path
) -> None:
    # M9: a card whose threshold was a default, not chosen on failures the model did not
    # train on, raised critical findings anyway
    def failing(root: Path) -> int:
        found = pl.DataFrame(predict(connect(root), Lake.at(root), NOW))
        return found.filter(pl.col("detector") == "failing_gpu_model").height

    assert failing(lake) > 0
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    path = copy / "_state" / "models" / "failing_gpu.json"
    card = json.loads(path.read_text())
    card["metrics"]["held_out_failures"] = 0
    card["threshold"] = 0.5  # what such a card held before
    path.write_text(json.dumps(card))
    assert failing(copy) == 0


def test_an_early_waste_model_with_no_wasteful_job_held_out_raises_no_finding(
    lake: Path, tmp_path: Path
) -> None:
    # its held-out part (the last 30 % of the history) held no wasteful job: the model was
    # stored with a threshold of 0.5 that nothing chose or checked, and raised findings with it
    from dataclasses import replace

    from app.commands.train import _not_evaluated
    from detectors.models.early_waste import EarlyWasteConfig
    from detectors.models.training import _train_early_waste

    def early(root: Path) -> int:
        found = pl.DataFrame(predict(connect(root), Lake.at(root), NOW))
        return found.filter(pl.col("detector").str.starts_with("early_waste_model")).height

    copy = always_wasteful(lake, tmp_path / "lake")
    assert early(copy) > 0
    data = load_data(connect(copy))
    late = pl.col("start_ts") > data.jobs["start_ts"].quantile(0.5)
    clean = data.jobs.with_columns(
        pl.when(late).then(0.0).otherwise(pl.col("low_busy_frac")).alias("low_busy_frac")
    )
    cards = _train_early_waste(replace(data, jobs=clean), Lake.at(copy), NOW, EarlyWasteConfig())
    assert [c.metrics["held_out_wasteful"] for c in cards] == [0, 0]
    assert [c.threshold for c in cards] == [None, None]
    assert all(
        "no wasteful job fell in its held-out data" in (_not_evaluated(c) or "") for c in cards
    )
    assert early(copy) == 0
    # a card stored so before (its threshold the default 0.5) raises none either
    path = copy / "_state" / "models" / "early_waste_30m.json"
    card = json.loads(path.read_text())
    card["threshold"] = 0.5
    path.write_text(json.dumps(card))
    assert early(copy) == 0


def test_early_waste_at_stake_is_at_most_what_the_job_held_after_the_prediction(
    lake: Path,
) -> None:
    # M9: at stake was GPUs x (time limit - minutes) even for jobs long over
    found = pl.DataFrame(predict(connect(lake), Lake.at(lake), NOW)).filter(
        pl.col("detector").str.starts_with("early_waste_model")
    )
    jobs = pl.DataFrame(
        connect(lake)
        .sql("SELECT job_id, gpus, start_ts, end_ts, time_limit_s FROM jobs_latest")
        .arrow()
    )
    rows = found.join(jobs, left_on="subject_id", right_on="job_id", suffix="_job")
    minutes = pl.col("detector").str.extract(r"_(\d+)m$").cast(pl.Int64)
    at = pl.col("start_ts_job") + pl.duration(minutes=minutes)
    ended = rows.filter(pl.col("end_ts_job") <= NOW)
    assert ended.height > 0
    held = pl.col("gpus") * (pl.col("end_ts_job") - at).dt.total_milliseconds() / 3.6e6
    assert ended.filter(pl.col("gpu_h_at_stake") > held + 1e-3).height == 0
    assert ended.filter(pl.col("gpus") * pl.col("time_limit_s") / 3600 > held + 1).height > 0
    assert ended["message"].str.contains("it has ended, holding").all()
    # the evidence says which figure it is: what the job held, or (running) to its limit
    forecast = rows["evidence"].map_elements(lambda e: json.loads(e)["forecast"], pl.Boolean)
    assert (forecast == rows["end_ts_job"].is_null()).all()


def always_wasteful(lake: Path, into: Path) -> Path:
    """A copy of `lake` whose early_waste_30m model calls every job wasteful: each job the data
    reach 30 minutes into is flagged."""
    import numpy as np
    from sklearn.dummy import DummyClassifier

    from detectors.models.store import save

    shutil.copytree(lake, into)
    card, _ = load(Lake.at(into), "early_waste_30m")
    always = DummyClassifier(strategy="constant", constant=1)
    always.fit(np.zeros((2, len(card.features))), np.array([0, 1]))
    save(Lake.at(into), card, always)
    return into


def test_an_early_prediction_read_long_after_needs_its_minutes_inside_the_data(
    lake: Path, tmp_path: Path
) -> None:
    # "now" defaulted to the wall clock: a job that had run 13 minutes when the data end got a
    # "30 min in" finding dated after the data's end
    copy = always_wasteful(lake, tmp_path / "lake")
    con = connect(copy)
    (data_end,) = con.execute("SELECT max(data_end) FROM data_extent").fetchone() or (None,)
    assert isinstance(data_end, dt.datetime)
    late = pl.DataFrame(predict(con, Lake.at(copy), data_end + dt.timedelta(days=30)))
    early = late.filter(pl.col("detector") == "early_waste_model_30m")
    assert early.height > 0
    minutes = pl.col("detector").str.extract(r"_(\d+)m$").cast(pl.Int64)
    jobs = pl.DataFrame(con.sql("SELECT job_id, start_ts FROM jobs_latest").arrow())
    rows = early.join(jobs, left_on="subject_id", right_on="job_id", suffix="_job")
    assert rows.height == early.height
    assert rows.filter(pl.col("start_ts_job") + pl.duration(minutes=minutes) > data_end).is_empty()
    assert (early["detected_ts"] <= data_end).all()


def test_an_early_prediction_is_made_only_where_its_clusters_data_reach_its_minutes(
    lake: Path, tmp_path: Path
) -> None:
    from detectors.models import model_frames, predict_frames

    copy = always_wasteful(lake, tmp_path / "lake")
    data = load_data(connect(copy))
    later = NOW + dt.timedelta(days=30)

    def flagged(data_end: pl.DataFrame | None) -> pl.DataFrame:
        found = pl.DataFrame(
            predict_frames(model_frames(Lake.at(copy), data, later, data_end), later)
        )
        return found.filter(pl.col("detector") == "early_waste_model_30m")

    everything = flagged(None)
    last = everything.sort("start_ts").row(-1, named=True)
    # the data end 13 minutes into the last flagged job: no "30 min in" for it any more
    end = last["start_ts"] - dt.timedelta(minutes=30) + dt.timedelta(minutes=13)
    cut = flagged(pl.DataFrame({"cluster": ["sim"], "data_end": [later], "telemetry_end": [end]}))
    assert last["subject_id"] not in cut["subject_id"].to_list()
    assert (cut["detected_ts"] <= end).all() and cut.height < everything.height


def test_a_run_time_finding_never_advises_a_limit_its_job_has_already_outrun(lake: Path) -> None:
    # job 1014 had run 47.4 h; its finding said "jobs like it run 20.3 h (p90); next time use
    # --time=1-00:23:00" (a limit that would have killed it) and claimed more GPU-hours at stake
    # than were left of its limit
    con = connect(lake)
    ends = dict(con.execute("SELECT cluster, max(data_end) FROM data_extent GROUP BY 1").fetchall())
    jobs = pl.DataFrame(
        con.sql("SELECT cluster, job_id, gpus, start_ts, time_limit_s FROM jobs_latest").arrow()
    )
    checked = 0
    for now in (NOW, dt.datetime(2026, 11, 4, 6, tzinfo=dt.UTC)):
        found = pl.DataFrame(predict(con, Lake.at(lake), now)).filter(
            pl.col("detector") == "runtime_quantiles_model"
        )
        rows = found.join(jobs, left_on=["cluster", "subject_id"], right_on=["cluster", "job_id"])
        assert rows.height == found.height
        for row in rows.iter_rows(named=True):
            end = min(ends[row["cluster"]], now)
            ran_s = (end - row["start_ts_right"]).total_seconds()
            p90_s = json.loads(row["evidence"])["p90_s"]
            assert ran_s < 1.2 * p90_s, row["message"]
            left_gpu_h = row["gpus"] * (row["time_limit_s"] - ran_s) / 3600
            assert row["gpu_h_at_stake"] <= left_gpu_h + 1e-6
            assert row["end_ts"] == end
            checked += 1
    assert checked > 0


def test_a_run_time_finding_on_a_job_past_the_telemetry_ends_after_it_starts(lake: Path) -> None:
    # the scheduler's records run past the samples: a job started after them got a finding
    # ending before it started, and counted as having run 0 s
    from detectors.models import model_frames, predict_frames

    cut = dt.datetime(2026, 11, 4, 12, tzinfo=dt.UTC)
    con = connect(lake)
    (now,) = con.execute("SELECT max(data_end) FROM data_extent").fetchone() or (None,)
    data = load_data(con)
    ends = pl.DataFrame({"cluster": ["sim"], "data_end": [now], "telemetry_end": [cut]})
    found = pl.DataFrame(predict_frames(model_frames(Lake.at(lake), data, now, ends), now))
    runtime = found.filter(pl.col("detector") == "runtime_quantiles_model")
    assert runtime.filter(pl.col("start_ts") > cut).height > 0
    assert (runtime["end_ts"] >= runtime["start_ts"]).all()


def test_model_findings_on_a_cluster_without_telemetry_end_at_its_data_not_the_clock(
    lake: Path, tmp_path: Path
) -> None:
    # a cluster with only its scheduler's records (no samples, no events): "now" was the wall
    # clock, and a run-time finding about a running job ran to it, past the data's end
    # (`gpuledger check`: findings_in_data)
    root = tmp_path / "notel"
    simulate(SimConfig(gpus=16, days=3, seed=11), Lake.at(root))
    for table in ("gpu_samples", "gpu_events"):
        shutil.rmtree(root / table)
    con = connect(root)
    attribute(con, root, AttributionConfig())
    shutil.copytree(lake / "_state" / "models", root / "_state" / "models", dirs_exist_ok=True)
    (data_end,) = con.execute("SELECT max(data_end) FROM data_extent").fetchone() or (None,)
    assert isinstance(data_end, dt.datetime)
    clock = data_end + dt.timedelta(hours=1)  # the run's clock, an hour on
    found = pl.DataFrame(predict(con, Lake.at(root), clock))
    runtime = found.filter(pl.col("detector") == "runtime_quantiles_model")
    assert runtime.height > 0
    assert (found["end_ts"].drop_nulls() <= data_end).all()
    assert (runtime["end_ts"] == data_end).all()


def test_a_cluster_with_no_data_end_gets_no_model_finding_and_breaks_no_other(lake: Path) -> None:
    # review: the failing-GPU alarms' messages were built before the rows of a cluster without
    # a data end were dropped: one message per dropped row too, and every model's predictions
    # failed with a shape error
    from detectors.models import model_frames, predict_frames

    con = connect(lake)
    data = load_data(con)
    ends = pl.DataFrame(
        {"cluster": ["another"], "data_end": [NOW], "telemetry_end": [NOW]},
        schema={
            "cluster": pl.String,
            "data_end": pl.Datetime("ms", "UTC"),
            "telemetry_end": pl.Datetime("ms", "UTC"),
        },
    )
    found = pl.DataFrame(predict_frames(model_frames(Lake.at(lake), data, NOW, ends), NOW))

    assert found.height == 0
