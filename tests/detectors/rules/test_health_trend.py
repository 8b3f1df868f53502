"""The health-trend rule on hand-made samples: a slow corrected-ECC climb warns (with the time it
first fired), one burst, a counter reset or a lone XID does not, and a noisy fleet raises its
own bar."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

from detectors.rules import RuleConfig, health_trend, rule_config_from
from detectors.rules.base import Window
from detectors.rules.health_trend import HealthTrendThresholds, windowed
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import CLUSTER, H100, at, connection
from warehouse import queries

NOW = at(2 * 86400)
HOUR = 3600


def sample(t: float, sbe: int | None, gpu: str = "GPU-a", index: int = 0) -> dict[str, object]:
    return {
        "ts": at(t),
        "cluster": CLUSTER,
        "node": "g001",
        "gpu_index": index,
        "gpu_uuid": gpu,
        "model": H100,
        "interval_s": 60.0,
        "gpu_util_pct": 100.0,
        "ecc_sbe_volatile": sbe,
        "source": "test",
    }


def series(counts: dict[float, int], hours: float = 24, gpu: str = "GPU-a", every_s: int = 300):
    """Samples every `every_s` for `hours`; the counter steps to `counts[h]` from hour h on."""
    out = []
    for t in range(0, int(hours * HOUR), every_s):
        value = 0
        for h, c in sorted(counts.items()):
            if t >= h * HOUR:
                value = c
        out.append(sample(t, value, gpu))
    return out


def xid(t: float, code: int, gpu: str = "GPU-a") -> dict[str, object]:
    return {
        "cluster": CLUSTER,
        "node": "g001",
        "gpu_uuid": gpu,
        "gpu_index": 0,
        "ts": at(t),
        "kind": "xid",
        "code": code,
    }


def run(tmp_path, samples=(), events=(), **thresholds):
    con = connection(tmp_path, gpu_samples=list(samples), gpu_events=list(events))
    config = RuleConfig(health_trend=HealthTrendThresholds(**thresholds))
    return run_rules(con, config, NOW, rules=health_trend.RULES).to_pylist()


def test_a_slow_climb_over_three_hours_warns_at_the_end_of_the_hour_it_first_fired(tmp_path):
    # one error at 10:xx, two by 12:xx, four by 13:xx: three different hours, accelerating
    climb = series({10.5: 1, 12.2: 2, 13.4: 4})
    [finding] = run(tmp_path, climb)
    assert finding["detector"] == "gpu_health_trend"
    assert finding["severity"] == "warn" and finding["predicted"]
    assert finding["subject_id"] == "GPU-a"
    assert finding["start_ts"] == at(14 * HOUR)  # the end of hour 13, when it first fired
    evidence = json.loads(finding["evidence"])
    assert evidence["errors_in_window"] == 4 and evidence["active_hours"] == 3
    assert evidence["window_h"] == 8 and evidence["bar"] == 3.0
    assert "4 new corrected ECC errors in 8 h over 3 different hours" in finding["message"]


def test_one_burst_of_many_errors_is_no_climb(tmp_path):
    assert run(tmp_path, series({9.5: 12})) == []


def test_a_steady_creep_warns_only_while_nothing_came_before_it(tmp_path):
    # one error an hour, among eight quiet GPUs: every 8 h window soon holds as many errors as
    # the one before (no acceleration); only the first hours, with nothing before, fire
    creep = series({h + 0.5: h + 1 for h in range(40)}, hours=40)
    quiet = [row for g in range(8) for row in series({}, hours=40, gpu=f"GPU-q{g}", every_s=900)]
    [finding] = run(tmp_path, creep + quiet)
    assert finding["start_ts"] == at(3 * HOUR) and finding["end_ts"] <= at(14 * HOUR)
    assert run(tmp_path / "b", creep + quiet, accel_ratio=1.5, min_errors=9) == []


def test_a_counter_reset_is_not_a_negative_rate_and_errors_after_it_count(tmp_path):
    # 50 errors since the driver load, then a reload (counter 0) at 6:00, then a climb
    counts = {0: 50, 6: 0, 8.5: 1, 9.5: 2, 10.5: 4}
    [finding] = run(tmp_path, series(counts))
    assert finding["start_ts"] == at(11 * HOUR)
    assert json.loads(finding["evidence"])["errors_in_window"] == 4
    # the reset alone, with the old count back to 0, warns of nothing
    assert run(tmp_path / "b", series({0: 50, 6: 0})) == []


def test_errors_across_an_exporter_outage_are_counted_when_the_samples_resume(tmp_path):
    climb = [s for s in series({10.5: 1, 12.2: 2, 13.4: 4}) if not HOUR * 11 <= _t(s) < HOUR * 12]
    climb = [s for i, s in enumerate(climb) if i % 7]  # and lost scrapes
    [finding] = run(tmp_path, climb)
    assert finding["start_ts"] == at(14 * HOUR)


def _t(row: dict[str, object]) -> float:
    ts = row["ts"]
    assert isinstance(ts, dt.datetime)
    return (ts - at(0)).total_seconds()


def test_a_lone_precursor_xid_is_no_warning_but_two_are(tmp_path):
    quiet = series({}, hours=12)
    assert run(tmp_path, quiet, [xid(3 * HOUR, 119)]) == []
    [finding] = run(tmp_path / "b", quiet, [xid(3 * HOUR, 119), xid(5.5 * HOUR, 120)])
    assert finding["start_ts"] == at(6 * HOUR)
    assert "2 precursor XID(s)" in finding["message"]
    # one with a new corrected error in the same window is enough
    [finding] = run(tmp_path / "c", series({4.2: 1}, hours=12), [xid(3 * HOUR, 92)])
    assert finding["start_ts"] == at(5 * HOUR)


def test_a_noisy_fleet_raises_its_own_bar():
    hours = [at(h * HOUR) for h in range(8)]

    def fleet(errors_of_gpu: list[int]) -> pl.DataFrame:
        rows = [
            {"cluster": CLUSTER, "gpu_uuid": f"G{g}", "hour": h, "sbe_new": n, "precursor_xids": 0}
            for g, n in enumerate(errors_of_gpu)
            for h in hours
        ]
        frame = windowed(pl.DataFrame(rows), HealthTrendThresholds())
        return frame.filter(pl.col("gpu_uuid") == "G8")

    # G8 with 8 errors an hour among quiet GPUs: it fires
    alone = fleet([0] * 8 + [8])
    assert alone["bar"].max() == 3.0 and alone["ecc_fires"].any()
    # the same GPU in a fleet where every GPU logs 0-8 an hour: the bar is above it
    noisy = fleet(list(range(9)))
    assert noisy["baseline"][0] > 0 and noisy["mad"][0] > 0
    assert (noisy["bar"] > noisy["recent"]).all() and not noisy["ecc_fires"].any()


def test_thresholds_come_from_the_detect_health_trend_table():
    config = rule_config_from({"health_trend": {"min_errors": 5, "window_h": 12}})
    assert config.health_trend.min_errors == 5 and config.health_trend.window_h == 12


def test_an_empty_lake_warns_of_nothing(tmp_path):
    assert run(tmp_path) == []
    assert Window(now=NOW).now == NOW


def test_the_hourly_query_counts_steps_once_per_gpu_with_resets_and_xid_only_hours(tmp_path):
    from detectors.rules.base import EPOCH
    from warehouse import queries

    rows = [sample(0, 5), sample(600, 7), sample(1200, 2), sample(4000, 3)]
    rows += [sample(600, 7), sample(1200, 2)]  # a second MIG instance repeats the device fields
    con = connection(tmp_path, gpu_samples=rows, gpu_events=[xid(3 * HOUR, 119), xid(HOUR, 13)])
    hourly = queries.run(
        con, health_trend.QUERY, since=EPOCH, precursor_xids=list(health_trend.PRECURSOR_XIDS)
    ).sort("hour")
    # hour 0: +2, then a reset to 2 (2 new since it); hour 1: +1; hour 3: only the XID 119
    assert hourly["sbe_new"].to_list() == [4, 1, 0]
    assert hourly["precursor_xids"].to_list() == [0, 0, 1]
    assert hourly["hour"].to_list() == [at(0), at(HOUR), at(3 * HOUR)]


def test_the_hourly_steps_by_hand(tmp_path):
    # GPU-a: 0, 1, 1 in hour 0 on g001; moved to g002 in hour 1: 3, then a reset to 0, then 2.
    # GPU-b's samples interleave with GPU-a's: 5, 5, 6. A MIG repeat of GPU-b's last sample.
    a = [(0, 0), (600, 1), (1200, 1), (3600, 3), (4200, 0), (4800, 2)]
    rows = [sample(t, v) | ({"node": "g002"} if t >= 3600 else {}) for t, v in a]
    rows += [sample(t + 300, v, gpu="GPU-b", index=1) for t, v in ((0, 5), (600, 5), (1200, 6))]
    rows.append(sample(1500, 6, gpu="GPU-b", index=1) | {"mig_instance": 1})
    con = connection(tmp_path, gpu_samples=rows[::-1], gpu_events=[xid(4000, 63)])
    got = queries.rows(con, health_trend.QUERY, since=at(0), precursor_xids=[63, 92, 119])

    assert [
        (r["gpu_uuid"], r["node"], r["hour"], r["samples"], r["sbe_new"], r["sbe_max"]) for r in got
    ] == [
        ("GPU-a", "g001", at(0), 3, 1, 1),
        ("GPU-a", "g002", at(HOUR), 3, 2 + 0 + 2, 3),  # a step down counts what follows it
        ("GPU-b", "g001", at(0), 4, 1, 6),  # the repeat is a step of 0
    ]
    assert [r["precursor_xids"] for r in got] == [0, 1, 0]
