"""The window loop, checkpoints, retries and splitting of the puller, against an in-process fake
Prometheus (collector/sources/prometheus/pull.py). The real server is in test_history_pull.py."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

from collector.errors import ConfigError
from collector.sources.prometheus.pull import PullConfig, batch_id_for, pull, range_query
from collector.sources.prometheus.state import CheckpointStore, source_key
from collector.sources.prometheus.transport import PrometheusUnavailable, QueryTooLarge
from warehouse.lake import Lake

T0 = dt.datetime(2026, 11, 2, 0, 0, tzinfo=dt.UTC)
T0_S = T0.timestamp()
STEP_S = 15.0
_QUERY = re.compile(r"^(?P<family>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<sel>.*)\})?\[(?P<ms>\d+)ms\]$")


class FakePrometheus:
    """Holds two GPUs' GPU_UTIL and POWER samples every 15 s from T0 up to `now` (the clock)."""

    url = "http://fake:9090"

    def __init__(
        self,
        now: dt.datetime,
        *,
        fail: int = 0,
        cut: int = 0,
        max_span_ms: int | None = None,
        step_s: float = STEP_S,
    ):
        self.now = now
        self.step_s = step_s
        self.fail = fail  # requests that fail before any succeeds
        self.cut = cut  # range answers cut short (a connection closed mid-body) before any whole
        self.max_span_ms = max_span_ms
        self.queries: list[tuple[str, float]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.lock = threading.Lock()

    def clock(self) -> dt.datetime:
        return self.now

    def _samples(self, family: str, lo_s: float, hi_s: float) -> list[dict]:
        out = []
        for g in range(2):
            labels = {
                "__name__": family,
                "UUID": f"GPU-{g}",
                "gpu": str(g),
                "Hostname": "n1",
                "hpc_job": "7" if g == 0 else "8",
                "instance": "n1:9400",
            }
            points = []
            k = max(0, int((lo_s - T0_S) // self.step_s) - 1)
            while (t := T0_S + k * self.step_s + 0.25 * g) <= min(hi_s, self.now.timestamp()):
                if t >= lo_s:
                    value = (k % 100) if family.endswith("UTIL") else 100 + k % 7 + 0.5
                    points.append([round(t, 3), str(value)])
                k += 1
            if points:
                out.append({"metric": labels, "values": points})
        return out

    def range_vector(self, query: str, at_s: float) -> bytes:
        with self.lock:
            self.queries.append((query, at_s))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            failing = self.fail > 0
            self.fail -= 1 if failing else 0
        try:
            if failing:
                raise PrometheusUnavailable("connection refused")
            found = _QUERY.match(query)
            assert found, query
            span_ms = int(found["ms"])
            if self.max_span_ms and span_ms > self.max_span_ms:
                raise QueryTooLarge("query processing would load too many samples")
            result = self._samples(found["family"], at_s - span_ms / 1000, at_s)
            body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
            whole = json.dumps(body, separators=(",", ":")).encode()
            with self.lock:
                cutting = self.cut > 0
                self.cut -= 1 if cutting else 0
            return whole[: len(whole) // 2] if cutting else whole
        finally:
            with self.lock:
                self.in_flight -= 1

    def family_names(self, match: str, start_s: float, end_s: float) -> list[str]:
        with self.lock:
            failing = self.fail > 0
            self.fail -= 1 if failing else 0
        if failing:
            raise PrometheusUnavailable("connection refused")
        return [
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "up",
        ]

    def series(self, match: str, start_s: float, end_s: float) -> list[dict[str, str]]:
        assert match.startswith("up")
        return [{"__name__": "up", "instance": "n1:9400", "job": "dcgm", "pod": "exporter-x"}]

    def close(self) -> None:
        pass


def lake_samples(lake: Path) -> pa.Table:
    return pads.dataset(lake / "gpu_samples", format="parquet", partitioning="hive").to_table()


def expected_rows(until: dt.datetime) -> int:
    """Samples of both GPUs in [T0, until] (GPU 1 is 0.25 s later)."""
    n = 0
    for g in range(2):
        k = 0
        while T0_S + k * STEP_S + 0.25 * g <= until.timestamp():
            k += 1
        n += k
    return n


def keys(table: pa.Table) -> list[tuple[str, int]]:
    ts = pc.cast(pc.cast(table.column("ts"), pa.timestamp("ms")), pa.int64()).to_pylist()
    return list(zip(table.column("gpu_uuid").to_pylist(), ts, strict=True))


def config(**kwargs) -> PullConfig:
    base = {
        "cluster": "c",
        "since": T0,
        "window_s": 3600,
        "backoff_s": 0.01,
    }
    return PullConfig(**{**base, **kwargs})


def test_a_bounded_pull_lands_every_sample_once(tmp_path):
    now = T0 + dt.timedelta(hours=5, minutes=30)
    fake = FakePrometheus(now)

    summary = pull(
        config(until=T0 + dt.timedelta(hours=3)), Lake.at(tmp_path), fake, clock=fake.clock
    )

    table = lake_samples(tmp_path)
    assert (
        table.num_rows
        == summary.samples
        == expected_rows(T0 + dt.timedelta(hours=3) - dt.timedelta(milliseconds=1))
    )
    assert len(set(keys(table))) == table.num_rows
    assert summary.windows == 3 and summary.checkpoint == T0 + dt.timedelta(hours=3)
    assert summary.families == ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE"]
    assert table.column("power_w").null_count == 0  # families of one scrape share a row


def test_a_pull_with_nothing_to_do_says_why_not_that_nothing_matched(tmp_path):
    """A one-shot run again over a range it completed, or a range after now, asked Prometheus
    for nothing and said "No DCGM metric families matched ... check --url and --selector"."""
    from app.commands.prometheus import render_summary

    fake = FakePrometheus(T0 + dt.timedelta(hours=5))
    until = config(until=T0 + dt.timedelta(hours=2))
    pull(until, Lake.at(tmp_path), fake, clock=fake.clock)
    again = pull(until, Lake.at(tmp_path), fake, clock=fake.clock)
    future = config(since=T0 + dt.timedelta(days=1), until=T0 + dt.timedelta(days=2))
    ahead = pull(future, Lake.at(tmp_path / "other"), fake, clock=fake.clock)

    assert (again.windows, again.samples, ahead.windows) == (0, 0, 0)
    text = render_summary(again, Lake.at(tmp_path)).splitlines()
    assert text[1] == "Nothing to pull: complete up to 2026-11-02 02:00:00 UTC already."
    text = render_summary(ahead, Lake.at(tmp_path)).splitlines()
    assert text[1] == "Nothing to pull yet: the range begins at 2026-11-03 00:00:00 UTC, after now."
    assert not any("No DCGM metric families" in line for line in text)


def test_a_rerun_resumes_at_the_checkpoint_and_replaces_the_open_window(tmp_path):
    first = FakePrometheus(T0 + dt.timedelta(hours=2, minutes=20))
    pull(config(), Lake.at(tmp_path), first, clock=first.clock, **_one_pass())
    store = CheckpointStore(tmp_path)
    cp = store.get("c", source_key(""))
    assert cp is not None and cp.done_until_ms == int((T0_S + 2 * 3600) * 1000)
    assert cp.window_s == 3600

    later = FakePrometheus(T0 + dt.timedelta(hours=4, minutes=10))
    summary = pull(config(), Lake.at(tmp_path), later, clock=later.clock, **_one_pass())

    table = lake_samples(tmp_path)
    assert len(set(keys(table))) == table.num_rows == expected_rows(later.now)
    asked = sorted({round(at) for _, at in later.queries})
    assert asked[0] == T0_S + 3 * 3600  # the window after the checkpoint was asked for again
    assert summary.windows == 3  # 02:00 (was open), 03:00, 04:00 (open)


def _one_pass() -> dict:
    """Arguments that stop a follow-mode pull after its first pass."""
    stop = threading.Event()

    def progress(window):
        if window.done == window.total:
            stop.set()

    return {"stop": stop, "progress": progress}


def test_windows_are_asked_as_raw_range_selectors_ending_at_the_windows_last_millisecond():
    query, at = range_query("DCGM_FI_DEV_GPU_UTIL", 'cluster="a"', 3_600_000, 7_200_000)

    assert query == 'DCGM_FI_DEV_GPU_UTIL{cluster="a"}[3600001ms]'
    assert at == 7199.999
    assert range_query("X", "", 0, 60_000)[0] == "X[60001ms]"


def test_batch_ids_name_the_window():
    assert (
        batch_id_for("della", "abc", int(T0_S * 1000), 3600)
        == "prometheus-della-abc-20261102T000000Z-3600s"
    )


def test_a_checkpoint_made_with_another_window_is_refused(tmp_path):
    fake = FakePrometheus(T0 + dt.timedelta(hours=2))
    pull(config(until=T0 + dt.timedelta(hours=2)), Lake.at(tmp_path), fake, clock=fake.clock)

    with pytest.raises(ConfigError, match="pulled with windows of 3600 s"):
        pull(config(window_s=600), Lake.at(tmp_path), fake, clock=fake.clock)


def test_an_outage_is_retried_with_backoff_then_reported_with_the_resume_point(tmp_path):
    fake = FakePrometheus(T0 + dt.timedelta(hours=2), fail=10**6)

    with pytest.raises(PrometheusUnavailable) as raised:
        pull(
            config(until=T0 + dt.timedelta(hours=2), retries=2),
            Lake.at(tmp_path),
            fake,
            clock=fake.clock,
        )

    message = str(raised.value)
    assert "did not answer the metric-name lookup after 3 attempt(s): connection refused" in message
    assert "the next run resumes from 2026-11-02T00:00:00+00:00" in message
    assert "\n" not in message


def test_a_brief_outage_is_ridden_out(tmp_path):
    fake = FakePrometheus(T0 + dt.timedelta(hours=2), fail=3)

    summary = pull(
        config(until=T0 + dt.timedelta(hours=2), retries=3),
        Lake.at(tmp_path),
        fake,
        clock=fake.clock,
    )

    assert summary.samples == expected_rows(
        T0 + dt.timedelta(hours=2) - dt.timedelta(milliseconds=1)
    )


def test_an_answer_cut_short_is_asked_again(tmp_path):
    # a connection closed mid-body: not JSON, where it failed the pull with no retry
    fake = FakePrometheus(T0 + dt.timedelta(hours=2), cut=2)

    summary = pull(
        config(until=T0 + dt.timedelta(hours=2), retries=3),
        Lake.at(tmp_path),
        fake,
        clock=fake.clock,
    )

    assert fake.cut == 0
    assert summary.samples == expected_rows(
        T0 + dt.timedelta(hours=2) - dt.timedelta(milliseconds=1)
    )


def test_a_window_too_large_for_prometheus_is_split(tmp_path):
    fake = FakePrometheus(T0 + dt.timedelta(hours=2), max_span_ms=20 * 60_000)

    summary = pull(
        config(until=T0 + dt.timedelta(hours=1)), Lake.at(tmp_path), fake, clock=fake.clock
    )

    assert summary.samples == expected_rows(
        T0 + dt.timedelta(hours=1) - dt.timedelta(milliseconds=1)
    )
    spans = {int(_QUERY.match(q)["ms"]) for q, _ in fake.queries if q.startswith("DCGM")}
    assert max(spans) > 20 * 60_000  # asked whole first, then in quarters
    assert len(set(keys(lake_samples(tmp_path)))) == summary.samples


def test_no_more_queries_are_in_flight_than_asked(tmp_path):
    fake = FakePrometheus(T0 + dt.timedelta(hours=12))

    pull(
        config(until=T0 + dt.timedelta(hours=12), window_s=1800, parallel=3),
        Lake.at(tmp_path),
        fake,
        clock=fake.clock,
    )

    assert 1 <= fake.most_in_flight <= 3


def test_following_live_data_stops_cleanly_when_told(tmp_path):
    fake = FakePrometheus(T0 + dt.timedelta(minutes=50))
    stop = threading.Event()
    passes = []

    def progress(window):
        passes.append(window)
        fake.now += dt.timedelta(minutes=30)  # data keeps arriving between passes
        if len(passes) >= 4:
            stop.set()

    summary = pull(
        config(poll_s=0.01), Lake.at(tmp_path), fake, clock=fake.clock, stop=stop, progress=progress
    )

    assert summary.stopped and summary.passes >= 2
    table = lake_samples(tmp_path)
    assert len(set(keys(table))) == table.num_rows


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"window_s": 7 * 60}, "must divide a day"),
        ({"selector": '{cluster="a"}'}, "without braces"),
        ({"until": T0}, "must be after since"),
        ({"since": dt.datetime(2026, 1, 1)}, "no time zone"),
    ],
)
def test_bad_configuration_is_refused_before_any_request(tmp_path, changes, message):
    fake = FakePrometheus(T0)

    with pytest.raises(ConfigError, match=message):
        pull(config(**changes), Lake.at(tmp_path), fake, clock=fake.clock)
    assert fake.queries == []


def test_a_last_window_holding_one_scrape_per_gpu_keeps_the_spacing_measured_before(tmp_path):
    # scrapes every 2 s; the open window [T0+60 s, T0+120 s) holds one scrape per GPU so far
    fake = FakePrometheus(T0 + dt.timedelta(seconds=61), step_s=2.0)

    pull(config(window_s=60), Lake.at(tmp_path), fake, clock=fake.clock, **_one_pass())

    table = lake_samples(tmp_path)
    late = pc.greater_equal(
        pc.cast(table.column("ts"), pa.timestamp("us", "UTC")), T0 + dt.timedelta(seconds=60)
    )
    assert table.filter(late).num_rows == 2
    assert set(pc.unique(table.column("interval_s")).to_pylist()) == {2.0}
