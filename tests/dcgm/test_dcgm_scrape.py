"""The exporter scraper against a real HTTP server on 127.0.0.1: landing, idempotence, retries,
dead exporters, health-event transitions, the interval loop and its clean stop."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.commands.dcgm_exporter import command_dcgm_exporter
from collector.errors import ConfigError
from collector.sources.dcgm_exporter.scrape import (
    EventLatch,
    ExporterUnavailable,
    batch_id_for,
    fetch_url,
    scrape_exporters,
)
from warehouse.lake import Lake

REPO = Path(__file__).resolve().parents[2]
T4 = "sample_t4_gpu_operator_busy.txt"
A800 = "sample_a800_mig_excerpt.txt"
EVENTS = "synthetic_hpc_job_events.txt"


def _clock(*times: dt.datetime):
    """A clock that returns `times` in turn, then keeps returning the last one."""
    it = iter(times)
    last = [times[-1]]

    def now() -> dt.datetime:
        last[0] = next(it, last[0])
        return last[0]

    return now


def _serve(pages, fixture_text, path: str, name: str) -> None:
    pages.pages[path] = (200, fixture_text(name))


def test_once_lands_one_row_per_gpu(exporter_server, fixture_text, read_lake, tmp_path, t0):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/t4", T4)
    _serve(pages, fixture_text, "/a800", A800)

    summary = scrape_exporters(
        [f"{base}/t4", f"{base}/a800"],
        "della",
        Lake.at(tmp_path),
        clock=_clock(t0),
        sleep=lambda s: None,
    )

    samples = read_lake(tmp_path, "gpu_samples")
    assert summary.rounds == 1 and summary.scrapes == 2 and not summary.failures
    assert summary.samples == samples.num_rows == 11  # 1 T4 + 10 A800 (3 MIG instances)
    assert set(samples.column("source").to_pylist()) == {"dcgm-exporter"}
    assert set(samples.column("ts").to_pylist()) == {t0}
    assert set(samples.column("interval_s").to_pylist()) == {30.0}  # --once: 30 s rows
    t4 = [r for r in samples.to_pylist() if r["model"] == "Tesla T4"][0]
    assert (t4["gpu_util_pct"], t4["node"]) == (91, "cp-bm14r7")
    assert summary.skipped == {
        "unknown_metric": 6,
        "zero_means_unsupported": 1,
        "conversion_error": 2,
    }


def test_a_second_scrape_at_the_same_time_lands_no_duplicates(
    exporter_server, fixture_text, read_lake, tmp_path, t0
):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", EVENTS)
    url = f"{base}/metrics"

    first = scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(t0))
    again = scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(t0))

    # 5 GPUs or MIG instances, two of them shared by two jobs: one row per sharer there
    assert first.samples == again.samples == 7
    assert read_lake(tmp_path, "gpu_samples").num_rows == 7
    assert read_lake(tmp_path, "job_gpus").num_rows == 7
    assert read_lake(tmp_path, "gpu_events").num_rows == 6  # landed once, not re-landed
    assert pages.hits["/metrics"] == 2
    later = scrape_exporters(
        [url], "della", Lake.at(tmp_path), clock=_clock(t0 + dt.timedelta(seconds=30))
    )
    assert later.samples == 7 and read_lake(tmp_path, "gpu_samples").num_rows == 14


def test_batch_ids_are_deterministic_per_cluster_url_and_time(t0):
    a = batch_id_for("della", "http://g1:9400/metrics", t0)

    assert a == batch_id_for("della", "http://g1:9400/metrics", t0)
    assert a.startswith(f"dcgm-{int(t0.timestamp() * 1000)}-")
    assert a != batch_id_for("della", "http://g2:9400/metrics", t0)
    assert a != batch_id_for("tiger", "http://g1:9400/metrics", t0)
    assert a != batch_id_for("della", "http://g1:9400/metrics", t0 + dt.timedelta(milliseconds=1))


def test_a_dead_exporter_is_retried_then_reported_while_the_live_one_lands(
    exporter_server, fixture_text, read_lake, dead_url, tmp_path, t0
):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", T4)
    pages.pages["/broken"] = (500, "internal error\n")
    calls: list[str] = []
    waits: list[float] = []

    def counting_fetch(url: str, timeout_s: float) -> str:
        calls.append(url)
        return fetch_url(url, timeout_s)

    summary = scrape_exporters(
        [dead_url, f"{base}/metrics", f"{base}/broken"],
        "della",
        Lake.at(tmp_path),
        fetch=counting_fetch,
        clock=_clock(t0),
        sleep=waits.append,
        timeout_s=2.0,
    )

    assert calls.count(dead_url) == 3 and calls.count(f"{base}/broken") == 3
    assert calls.count(f"{base}/metrics") == 1
    assert sorted(waits) == [0.5, 0.5, 1.0, 1.0]  # backoff 0.5 s, then 1 s, per dead exporter
    assert summary.failures == {dead_url: 1, f"{base}/broken": 1}
    assert "Connection refused" in summary.last_error[dead_url]
    assert "HTTP 500" in summary.last_error[f"{base}/broken"]
    assert summary.retries == 4 and summary.scrapes == 1
    assert read_lake(tmp_path, "gpu_samples").num_rows == 1


def test_fetch_url_reports_failures_as_exporter_unavailable(dead_url, exporter_server):
    base, pages = exporter_server
    pages.pages["/big"] = (200, "x" * 9 + "\n")

    assert fetch_url(f"{base}/big", 2.0) == "x" * 9 + "\n"
    with pytest.raises(ExporterUnavailable, match="Connection refused"):
        fetch_url(dead_url, 2.0)
    with pytest.raises(ExporterUnavailable, match="HTTP 404 Not Found"):
        fetch_url(f"{base}/missing", 2.0)


@pytest.mark.parametrize(
    ("head", "sent", "message"),
    [
        # Content-Length says the whole page; the connection closes halfway
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n",
            b'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 16.',
            "cut short",
        ),
        # no Content-Length: the body ends where the connection does, mid-value
        (b"HTTP/1.0 200 OK\r\n\r\n", b'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 16.', "no final line feed"),
    ],
    ids=["content-length", "close-delimited"],
)
def test_a_response_cut_short_is_unavailable_not_a_scrape(head, sent, message):
    # read with a size, a short body raises nothing: "16." of 16.365 W landed as 16 W
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(head + sent)
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with pytest.raises(ExporterUnavailable, match=message):
            fetch_url(f"http://127.0.0.1:{server.getsockname()[1]}/metrics", 5.0)
    finally:
        thread.join(5)
        server.close()


def test_an_exporter_that_trickles_its_body_is_given_up_on_at_the_timeout():
    # one byte every few tenths of a second: each read came within the socket's timeout, so the
    # collector waited forever, and its thread kept the process alive past SIGTERM
    import socket
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        try:
            while not stop.wait(0.2):
                conn.sendall(b"#")
        except OSError:
            pass  # the collector hung up: what it should do
        finally:
            conn.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    began = time.monotonic()
    try:
        with pytest.raises(ExporterUnavailable, match="did not end in time"):
            fetch_url(f"http://127.0.0.1:{server.getsockname()[1]}/metrics", 0.5)
        assert time.monotonic() - began < 2.0
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.mark.parametrize(
    ("urls", "cluster", "interval_s", "message"),
    [
        ([], "della", None, "no exporter URL"),
        (["ftp://g1/metrics"], "della", None, "not an http"),
        (["http:///metrics"], "della", None, "not an http"),
        (["http://g1:port/metrics"], "della", None, "not an http"),
        (["http://g1:9400/metrics"], " ", None, "cluster name is empty"),
        (["http://g1:9400/metrics"], "della", 0.0, "must be positive"),
    ],
)
def test_bad_configuration_fails_at_startup(urls, cluster, interval_s, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        scrape_exporters(urls, cluster, Lake.at(tmp_path), interval_s=interval_s)
    assert not (tmp_path / "gpu_samples").exists()


def test_health_events_land_when_they_appear_or_change(
    exporter_server, fixture_text, read_lake, tmp_path, t0
):
    base, pages = exporter_server
    text = fixture_text(EVENTS)
    _serve(pages, fixture_text, "/metrics", EVENTS)
    url = f"{base}/metrics"
    step = dt.timedelta(seconds=30)

    def kinds() -> list[tuple[str, int | None]]:
        events = read_lake(tmp_path, "gpu_events").to_pylist()
        return sorted((e["kind"], e["code"]) for e in events if e["ts"] == latest[0])

    latest = [t0]
    scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(t0))
    assert len(kinds()) == 6
    latest[0] = t0 + step  # the same conditions again: sticky XID, same bits → nothing new
    scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(latest[0]))
    assert kinds() == []
    # a new XID (48) and the DBE count rising to 3 are new events; the rest still holds
    pages.pages["/metrics"] = (
        200,
        text.replace('err_code="79"', 'err_code="48"')
        .replace("} 79", "} 48")
        .replace('hpc_job="5001"} 2', 'hpc_job="5001"} 3')
        .replace('hpc_job="5002"} 2', 'hpc_job="5002"} 3'),
    )
    latest[0] = t0 + 2 * step
    scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(latest[0]))
    assert kinds() == [("ecc_dbe", 3), ("xid", 48)]
    # the power brake clears (XID and DBE change back), then the brake returns: new event
    pages.pages["/metrics"] = (200, text.replace("} 128", "} 0"))
    latest[0] = t0 + 3 * step
    scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(latest[0]))
    assert kinds() == [("ecc_dbe", 2), ("xid", 79)]
    pages.pages["/metrics"] = (200, text)
    latest[0] = t0 + 4 * step
    scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(latest[0]))
    assert kinds() == [("power_brake", 128)]
    # an unreadable XID (sentinel) does not clear the remembered one: no repeat when it is back
    pages.pages["/metrics"] = (200, text.replace("} 79", "} 9223372036854775794"))
    latest[0] = t0 + 5 * step
    scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(latest[0]))
    assert kinds() == []
    pages.pages["/metrics"] = (200, text)
    latest[0] = t0 + 6 * step
    scrape_exporters([url], "della", Lake.at(tmp_path), clock=_clock(latest[0]))
    assert kinds() == []


def _xid(cluster: str, ts: dt.datetime, code: int):
    """A gpu_events table of one XID on GPU-9 of node n1."""
    import pyarrow as pa

    from warehouse.schema import RAW_TABLES

    row = {"cluster": cluster, "node": "n1", "gpu_uuid": "GPU-9", "ts": ts, "kind": "xid"}
    return pa.Table.from_pylist([row | {"code": code}], schema=RAW_TABLES["gpu_events"].schema)


class _Killed(BaseException):
    """The process killed (SIGKILL) at a chosen step."""


class _KilledBeforeCommit(EventLatch):
    """A latch whose run is killed after the scrape's rows landed, before it remembers them."""

    def commit(self, *args: object, **kwargs: object) -> None:
        raise _Killed


def test_a_run_killed_between_landing_events_and_remembering_them_lands_each_once(
    exporter_server, fixture_text, read_lake, tmp_path, t0
):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", EVENTS)
    url, lake = f"{base}/metrics", Lake.at(tmp_path)
    state = lake.state_dir() / "dcgm_exporter.sqlite"
    with pytest.raises(_Killed):
        scrape_exporters(
            [url], "della", lake, clock=_clock(t0), event_latch=_KilledBeforeCommit(state)
        )
    landed = sorted((e["kind"], e["code"]) for e in read_lake(tmp_path, "gpu_events").to_pylist())
    assert len(landed) == 6

    # the next run (the same sticky conditions 30 s later) lands none of them again
    later = t0 + dt.timedelta(seconds=30)
    scrape_exporters([url], "della", lake, clock=_clock(later))
    events = read_lake(tmp_path, "gpu_events").to_pylist()
    assert sorted((e["kind"], e["code"]) for e in events) == landed
    assert {e["ts"] for e in events} == {t0}


def test_events_staged_but_never_landed_land_at_the_next_start(
    exporter_server, fixture_text, read_lake, tmp_path, t0
):
    # killed after staging, before the rows were written: the next start lands them, once
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", T4)
    lake = Lake.at(tmp_path)
    staged = _xid("della", t0, 79)
    state = lake.state_dir() / "dcgm_exporter.sqlite"
    EventLatch(state).stage("staged-batch", "della", staged)
    # another cluster's staged batch is its own collector's to land, not this one's
    EventLatch(state).stage("theirs", "other", _xid("other", t0, 79))
    for _ in range(2):
        scrape_exporters([f"{base}/metrics"], "della", lake, clock=_clock(t0))
    events = read_lake(tmp_path, "gpu_events").to_pylist()
    assert [(e["gpu_uuid"], e["kind"], e["code"]) for e in events] == [("GPU-9", "xid", 79)]
    assert EventLatch(state).transitions(staged).num_rows == 0


def test_a_staged_batch_the_state_file_cannot_decode_is_dropped_with_a_warning(
    exporter_server, fixture_text, read_lake, tmp_path, t0, caplog
):
    import sqlite3

    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", T4)
    lake = Lake.at(tmp_path)
    state = lake.state_dir() / "dcgm_exporter.sqlite"
    staged = _xid("della", t0, 1)
    EventLatch(state).stage("damaged", "della", staged)
    with sqlite3.connect(state) as con:
        con.execute("UPDATE event_outbox SET events = substr(events, 1, 32)")

    summary = scrape_exporters([f"{base}/metrics"], "della", lake, clock=_clock(t0))

    assert summary.scrapes == 1
    assert "do not decode" in caplog.text and "damaged" in caplog.text
    with sqlite3.connect(state) as con:
        assert con.execute("SELECT count(*) FROM event_outbox").fetchone() == (0,)


def test_event_latch_survives_a_restart(tmp_path):
    import pyarrow as pa

    from warehouse.schema import RAW_TABLES

    schema = RAW_TABLES["gpu_events"].schema
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    events = pa.Table.from_pylist(
        [{"cluster": "c", "node": "n", "gpu_uuid": "GPU-1", "ts": ts, "kind": "xid", "code": 13}],
        schema=schema,
    )
    path = tmp_path / "latch.sqlite"
    first = EventLatch(path)
    assert first.transitions(events).num_rows == 1
    first.commit("c", {("GPU-1", "xid")}, events)

    assert EventLatch(path).transitions(events).num_rows == 0
    EventLatch(path).commit("c", set(), events.slice(0, 0))  # XID not read: still remembered
    assert EventLatch(path).transitions(events).num_rows == 0
    EventLatch(path).commit("c", {("GPU-1", "xid")}, events.slice(0, 0))  # read, and gone
    assert EventLatch(path).transitions(events).num_rows == 1


def test_interval_loop_scrapes_until_stopped(
    exporter_server, fixture_text, read_lake, tmp_path, t0
):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", T4)
    stop = threading.Event()
    ticks = (t0 + dt.timedelta(seconds=15 * i) for i in itertools.count())
    seen = []

    def on_scrape(outcome):
        seen.append(outcome)
        if len(seen) == 3:
            stop.set()

    summary = scrape_exporters(
        [f"{base}/metrics"],
        "della",
        Lake.at(tmp_path),
        clock=lambda: next(ticks),
        interval_s=0.05,
        stop=stop,
        on_scrape=on_scrape,
    )

    assert summary.rounds == 3 and summary.samples == 3
    samples = read_lake(tmp_path, "gpu_samples")
    assert sorted(samples.column("ts").to_pylist()) == [
        t0 + dt.timedelta(seconds=s) for s in (0, 15, 30)
    ]
    assert samples.column("interval_s").to_pylist() == [pytest.approx(0.05)] * 3
    assert len({o.batch_id for o in seen}) == 3


def test_a_dead_exporter_sits_out_growing_numbers_of_rounds(dead_url, tmp_path, t0):
    def fetch(url: str, timeout_s: float) -> str:
        raise ExporterUnavailable(f"{url}: down")

    summary = scrape_exporters(
        [dead_url],
        "della",
        Lake.at(tmp_path),
        fetch=fetch,
        clock=lambda: t0,
        interval_s=0.01,
        attempts=1,
        max_rounds=12,
    )

    # tried in rounds 1, 2, 4 and 8: after its k-th failed round it sits out 2^(k-1) - 1 rounds
    assert summary.rounds == 12
    assert summary.failures[dead_url] == 4
    assert summary.cooldown_skips == 8


def _cli(args, env_lake: Path | None = None):
    env = {"GPULEDGER_LAKE": str(env_lake)} if env_lake else {}
    return CliRunner().invoke(command_dcgm_exporter, args, env=env)


def test_cli_once_prints_what_landed_and_what_was_skipped(
    exporter_server, fixture_text, read_lake, tmp_path
):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", A800)

    result = _cli(["--cluster", "della", "--url", f"{base}/metrics", "--once"], env_lake=tmp_path)

    assert result.exit_code == 0, result.output
    assert "Landed 10 gpu_samples row(s)" in result.output
    assert "conversion_error 2" in result.output
    assert str(tmp_path) in result.output
    assert read_lake(tmp_path, "gpu_samples").num_rows == 10


def test_cli_reports_a_dead_exporter_in_one_line_and_exits_1(
    exporter_server, fixture_text, read_lake, dead_url, tmp_path
):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", T4)

    result = _cli(
        [
            "--cluster",
            "della",
            "--url",
            f"{base}/metrics",
            "--url",
            dead_url,
            "--attempts",
            "1",
            "--lake",
            str(tmp_path),
        ]
    )

    assert result.exit_code == 1
    assert "Landed 1 gpu_samples row(s)" in result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert f"1 of 2 exporter(s) could not be scraped: {dead_url}" in error
    assert "Traceback" not in result.output
    assert read_lake(tmp_path, "gpu_samples").num_rows == 1


@pytest.mark.parametrize(
    "body",
    [
        "<!DOCTYPE html>\n<html><body><h1>Directory listing</h1></body></html>\n",
        "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\n"
        "go_goroutines 42\nnode_load1 0.5\n",
    ],
    ids=["html-page", "another-exporter"],
)
def test_cli_an_answer_without_any_dcgm_metric_is_a_failed_scrape(
    exporter_server, read_lake, tmp_path, body
):
    base, pages = exporter_server
    pages.pages["/"] = (200, body)

    result = _cli(["--cluster", "della", "--url", f"{base}/", "--lake", str(tmp_path)])

    assert result.exit_code == 1, result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert f"{base}/" in error and "no DCGM metric" in error and "/metrics" in error
    assert read_lake(tmp_path, "gpu_samples").num_rows == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "c", "--url", "ftp://x/metrics"], "not an http(s) URL"),
        (["--cluster", "c", "--url", "http://x/metrics", "--once", "--interval", "5"], "not both"),
        (["--cluster", "c", "--url", "http://x/metrics", "--interval", "0"], "--interval"),
        (["--url", "http://x/metrics"], "--cluster"),
        (["--cluster", "c"], "--url"),
    ],
)
def test_cli_usage_errors_exit_2(args, message, tmp_path):
    result = _cli([*args, "--lake", str(tmp_path)])

    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "gpu_samples").exists()


def test_cli_help_explains_the_command():
    result = _cli(["--help"])

    assert result.exit_code == 0
    for text in ("--url URL", "--cluster", "--once", "--interval S", "GPULEDGER_LAKE", "hpc_job"):
        assert text in result.output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interval_loop_stops_cleanly_on_signal(
    exporter_server, fixture_text, read_lake, tmp_path, sig
):
    base, pages = exporter_server
    _serve(pages, fixture_text, "/metrics", T4)
    code = "from app.commands.dcgm_exporter import command_dcgm_exporter as c; c()"
    args = [
        "--cluster",
        "della",
        "--url",
        f"{base}/metrics",
        "--interval",
        "1",
        "--lake",
        str(tmp_path),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # one line per exporter per round
        assert "1 sample row(s)" in first, first
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 0, err
    assert "Landed" in out and "Traceback" not in err
    assert read_lake(tmp_path, "gpu_samples").num_rows >= 1
    assert not list(tmp_path.rglob(".*.tmp"))  # no half-written file left behind
