"""The `gpuledger` command line (DESIGN §5): help, the simulate → attribute → query pipeline,
demo and bench, and errors as one clear line with exit code 1 (2 for usage errors)."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from warehouse.connection import connect

SMALL = ["--gpus", "16", "--days", "1"]


def _runner() -> CliRunner:
    """A runner that does not see the developer's GPULEDGER_* settings."""
    return CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})


def invoke(*args: str) -> Result:
    return _runner().invoke(cli, list(args))


def _assert_one_line_error(result: Result, code: int, *fragments: str) -> str:
    """The command failed with `code`, said why in one line, and printed no traceback."""
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    for fragment in fragments:
        assert fragment in errors[0], result.output
    return errors[0]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small lake built through the CLI: simulate, then attribute."""
    root = tmp_path_factory.mktemp("cli") / "lake"
    simulated = invoke("simulate", "--lake", str(root), *SMALL, "--quiet")
    assert simulated.exit_code == 0, simulated.output
    assert "Simulated cluster 'sim': 16 GPUs" in simulated.output
    attributed = invoke("attribute", "--lake", str(root), "--quiet")
    assert attributed.exit_code == 0, attributed.output
    assert "job_usage" in attributed.output
    return root


@pytest.fixture(scope="module")
def job_usage(lake: Path) -> pl.DataFrame:
    con = connect(lake, require=("job_usage",))
    try:
        frame: pl.DataFrame = con.sql("SELECT * FROM job_usage").pl()
        return frame
    finally:
        con.close()


# ---------------------------------------------------------------- help


@pytest.mark.parametrize(
    ("command", "mentions"),
    [
        ([], ["demo", "simulate", "attribute", "query", "dashboard", "bench"]),
        (["simulate"], ["--lake", "--gpus", "--days", "--seed", "--cluster", "--interval"]),
        (["attribute"], ["--lake", "--idle-below", "--bucket", "--quiet"]),
        (["query"], ["NAME", "--lake", "--param", "--format", "--out", "--limit"]),
        (["dashboard"], ["--lake", "--port", "--address"]),
        (["demo"], ["--lake", "--gpus", "--days", "--seed", "--no-dashboard", "--port"]),
        (
            ["bench"],
            [
                "--scenario",
                "--gpus",
                "--days",
                "--scale-gpus",
                "--scale-interval",
                "--replay-gpus",
                "--out",
                "--lake",
            ],
        ),
    ],
)
def test_help_exits_0_and_lists_the_options(command: list[str], mentions: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    for word in mentions:
        assert word in result.output, f"{word} missing from {command} --help"


# ---------------------------------------------------------------- simulate, attribute, query


def test_query_writes_csv(lake: Path, job_usage: pl.DataFrame) -> None:
    result = invoke("query", "job_usage", "--lake", str(lake), "--format", "csv")
    assert result.exit_code == 0, result.output
    frame = pl.read_csv(io.StringIO(result.stdout))
    assert frame.columns == job_usage.columns
    assert frame.height == job_usage.height > 0
    assert sorted(frame["job_id"].cast(pl.String)) == sorted(job_usage["job_id"])


def test_query_writes_lists_into_csv_as_comma_separated_text(lake: Path) -> None:
    result = invoke("query", "jobs", "--lake", str(lake), "--format", "csv")
    assert result.exit_code == 0, result.output
    frame = pl.read_csv(io.StringIO(result.stdout))
    nodes = frame.filter(pl.col("start_ts").is_not_null())["nodes"]
    assert nodes.len() > 0
    assert nodes.str.contains(r"^gpu-\d{3}(,gpu-\d{3})*$").all(), nodes


def test_query_writes_json(lake: Path, job_usage: pl.DataFrame) -> None:
    result = invoke("query", "job_usage", "--lake", str(lake), "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == job_usage.height
    assert set(rows[0]) == set(job_usage.columns)


def test_query_writes_parquet_to_a_file(
    lake: Path, job_usage: pl.DataFrame, tmp_path: Path
) -> None:
    out = tmp_path / "f.parquet"
    result = invoke(
        "query", "job_usage", "--lake", str(lake), "--format", "parquet", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(out)
    assert frame.columns == job_usage.columns
    assert frame.height == job_usage.height


def test_query_limits_rows(lake: Path) -> None:
    result = invoke("query", "jobs", "--lake", str(lake), "--format", "json", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 2


def test_query_runs_a_shipped_query_with_params(lake: Path) -> None:
    result = invoke(
        "query",
        "dashboard/top_users_by_idle",
        "--lake",
        str(lake),
        "-p",
        "cluster=sim",
        "-p",
        "limit=3",
        "-p",
        "start=null",
        "-p",
        "end=2026-11-05T00:00:00+00:00",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    users = json.loads(result.stdout)
    assert 1 <= len(users) <= 3
    assert all(u["cluster"] == "sim" for u in users)
    idle = [u["idle_gpu_h"] for u in users]
    assert idle == sorted(idle, reverse=True)


def test_query_names_an_unknown_parameter(lake: Path) -> None:
    result = invoke(
        "query", "dashboard/top_users_by_idle", "--lake", str(lake), "-p", "cluster=sim",
        "-p", "limit=3", "-p", "start=null", "-p", "end=null", "-p", "bogus=1",
    )  # fmt: skip
    line = _assert_one_line_error(result, 1, "expects parameters")
    assert line.endswith("; unknown: bogus")


def test_an_unknown_query_name_suggests_the_listed_names_only(lake: Path) -> None:
    result = invoke("query", "dashboard/top_user_by_idle", "--lake", str(lake))
    line = _assert_one_line_error(result, 2, "is neither a table nor a shipped query")
    assert "did you mean dashboard/top_users_by_idle," in line
    assert "known: " in line and "job_usage" in line
    # the pipeline's internal queries, which the listing leaves out, are not offered either
    assert "attribution/" not in line and "bench/" not in line


def test_query_prints_a_table_by_default(lake: Path) -> None:
    result = invoke("query", "job_usage", "--lake", str(lake), "--limit", "3")
    assert result.exit_code == 0, result.output
    assert "shape: (3, " in result.stdout


# ---------------------------------------------------------------- errors


def test_attribute_on_an_empty_lake_names_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _assert_one_line_error(invoke("attribute", "--lake", str(empty)), 1, str(empty))


def test_attribute_on_a_missing_lake_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    _assert_one_line_error(invoke("attribute", "--lake", str(missing)), 1, str(missing))
    assert not missing.exists()


def test_query_on_a_missing_lake_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = invoke("query", "job_usage", "--lake", str(missing))
    _assert_one_line_error(result, 1, str(missing))
    assert not missing.exists()


@pytest.mark.parametrize("name", ["job_usage", "jobs_latest", "dashboard/top_users_by_idle"])
def test_query_on_a_folder_that_holds_no_lake_names_it(tmp_path: Path, name: str) -> None:
    (tmp_path / "notes.txt").write_text("a folder, but not a lake\n")
    params = ["-p", "cluster=sim", "-p", "limit=1", "-p", "start=null", "-p", "end=null"]
    args = params if "/" in name else []
    result = invoke("query", name, "--lake", str(tmp_path), *args)
    _assert_one_line_error(result, 1, str(tmp_path))


def test_query_of_a_table_with_no_rows_yet_is_an_empty_result(lake: Path) -> None:
    result = invoke("query", "evaluation_scores", "--lake", str(lake), "--format", "csv")
    assert result.exit_code == 0, result.output


def test_query_of_an_unknown_name_is_a_usage_error_listing_known_names(lake: Path) -> None:
    result = invoke("query", "nosuchthing", "--lake", str(lake))
    _assert_one_line_error(result, 2, "'nosuchthing'", "job_usage", "dashboard/top_users_by_idle")


def test_query_without_its_params_names_the_expected_ones(lake: Path) -> None:
    result = invoke("query", "dashboard/top_users_by_idle", "--lake", str(lake))
    _assert_one_line_error(result, 1, "dashboard/top_users_by_idle", "cluster", "limit")


@pytest.mark.parametrize(
    ("param", "fragment"),
    [
        ("limit=ten", "'ten'"),
        ("limit=-5", "negative"),
        ("start=yesterday", "'yesterday'"),
        ("limit=1.5", "$limit takes an integer (the query's LIMIT), got 1.5"),  # not 2 rows
    ],
)
def test_query_with_a_param_of_the_wrong_type_names_it(
    lake: Path, param: str, fragment: str
) -> None:
    params = {"cluster": "sim", "limit": "10", "start": "null", "end": "null"}
    key, value = param.split("=", 1)
    params[key] = value
    args = [arg for k, v in params.items() for arg in ("-p", f"{k}={v}")]
    result = invoke("query", "dashboard/top_users_by_idle", "--lake", str(lake), *args)
    _assert_one_line_error(result, 1, "dashboard/top_users_by_idle", fragment)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["-p", "cluster"], "KEY=VALUE"),  # not KEY=VALUE
        (["-p", "cluster=sim"], "--param"),  # a table takes no params
        (["--format", "parquet"], "--out"),  # parquet needs a file
        (["--format", "xml"], "xml"),
    ],
)
def test_bad_query_options_are_usage_errors(lake: Path, args: list[str], fragment: str) -> None:
    result = invoke("query", "job_usage", "--lake", str(lake), *args)
    _assert_one_line_error(result, 2, fragment)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_query_out_to_a_file_that_cannot_be_written_names_it(
    lake: Path, tmp_path: Path, fmt: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    out = blocker / f"jobs.{fmt}"
    result = invoke("query", "job_usage", "--lake", str(lake), "--format", fmt, "--out", str(out))
    _assert_one_line_error(result, 1, str(out), "--out")


def test_simulate_refuses_zero_gpus(tmp_path: Path) -> None:
    result = invoke("simulate", "--lake", str(tmp_path / "lake"), "--gpus", "0")
    _assert_one_line_error(result, 2, "--gpus", "0")
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("cluster", ["", "  "])
def test_simulate_refuses_an_empty_cluster_name(tmp_path: Path, cluster: str) -> None:
    # a usage error, as on every command that takes --cluster (tests/app/test_user_mistakes.py)
    result = invoke("simulate", "--lake", str(tmp_path / "lake"), "--cluster", cluster, *SMALL)
    _assert_one_line_error(result, 2, "cluster name may not be empty", "--cluster")
    assert not (tmp_path / "lake").exists()


def test_simulate_refuses_an_interval_that_does_not_divide_a_day(tmp_path: Path) -> None:
    result = invoke("simulate", "--lake", str(tmp_path / "lake"), "--interval", "7", *SMALL)
    assert result.exit_code in (1, 2), result.output
    _assert_one_line_error(result, result.exit_code, "7", "divide a day")
    assert not (tmp_path / "lake").exists()


def test_simulate_refuses_a_start_that_is_not_a_date(tmp_path: Path) -> None:
    result = invoke("simulate", "--lake", str(tmp_path / "lake"), "--start", "yesterday")
    _assert_one_line_error(result, 2, "'yesterday'", "ISO")


def test_simulate_refuses_days_after_tomorrow(tmp_path: Path) -> None:
    # attribute would leave them out (a clock that is wrong): say so before simulating them
    result = invoke("simulate", "--lake", str(tmp_path / "lake"), "--start", "2100-01-04", *SMALL)
    _assert_one_line_error(result, 2, "past tomorrow", "start on")
    assert not (tmp_path / "lake").exists()
    # the latest start it advises is accepted, the day after it refused
    advised = dt.date.fromisoformat(result.output.split("start on ")[1].split()[0])
    later = str(advised + dt.timedelta(days=1))
    refused = invoke("simulate", "--lake", str(tmp_path / "lake"), "--start", later, *SMALL)
    assert refused.exit_code == 2, refused.output
    taken = invoke("simulate", "--lake", str(tmp_path / "lake"), "--start", str(advised), *SMALL)
    assert taken.exit_code == 0, taken.output


def test_simulate_into_a_lake_that_cannot_be_created_names_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    lake = blocker / "lake"
    result = invoke("simulate", "--lake", str(lake), *SMALL, "--quiet")
    _assert_one_line_error(result, 1, str(lake), "Not a directory")


def test_attribute_with_a_damaged_state_database_names_it(lake: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    state = copy / "_state" / "attribution.sqlite"
    state.write_text("not a database\n")
    result = invoke("attribute", "--lake", str(copy), "--quiet")
    _assert_one_line_error(result, 1, str(state), "SQLite")


# ---------------------------------------------------------------- demo and bench


@pytest.mark.slow
def test_demo_prints_the_summary(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = invoke("demo", "--lake", str(lake), "--no-dashboard", *SMALL)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Cluster sim: 16 GPUs" in out
    assert "occupancy (allocated / capacity)" in out
    assert "idle while allocated" in out
    # the span is printed as capacity uses it: GPUs × span = the capacity shown
    head = re.search(
        r"Cluster sim: (\d+) GPUs, (\S+ \d\d:\d\d:\d\d) to (\S+ \d\d:\d\d:\d\d) UTC "
        r"\(([\d,]+\.\d\d) h\)",
        out,
    )
    assert head is not None, out
    start, end = (dt.datetime.fromisoformat(t) for t in head.group(2, 3))
    span_h = float(head.group(4).replace(",", ""))
    assert span_h == round((end - start).total_seconds() / 3600, 2)
    capacity = float(re.search(r"of ([\d,]+) possible", out).group(1).replace(",", ""))
    assert abs(int(head.group(1)) * span_h - capacity) <= 0.5 + 0.005 * int(head.group(1))
    assert "top 5 users by idle GPU-hours:" in out
    users = out.split("top 5 users by idle GPU-hours:")[1].split("top 5 jobs")[0]
    assert "idle GPU-h" in users, "no user listed under the top idle users"
    # the demo is deterministic: running it again over the same lake prints the same summary
    again = invoke("demo", "--lake", str(lake), "--no-dashboard", *SMALL)
    assert again.exit_code == 0, again.output
    assert again.stdout.split("Cluster sim:")[1] == out.split("Cluster sim:")[1]


def test_spark_options_need_the_spark_engine(tmp_path: Path) -> None:
    result = invoke("attribute", "--lake", str(tmp_path), "--spark-master", "local[1]")
    _assert_one_line_error(result, 2, "--spark-master", "--engine spark")


def test_spark_without_java_is_one_error_line(tmp_path: Path) -> None:
    """PySpark starts Java: without it a 50-line traceback ended in JAVA_GATEWAY_EXITED."""
    import subprocess
    import sys

    from tests.marts import rows as r

    r.land(tmp_path / "lake", "gpu_samples", r.samples(range(0, 300, 30)))
    no_java = tmp_path / "bin"  # the system's programs but java
    no_java.mkdir()
    for program in Path("/usr/bin").iterdir():
        if program.name != "java":
            (no_java / program.name).symlink_to(program)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(no_java)}
    gpuledger = Path(sys.executable).with_name("gpuledger")
    lake = str(tmp_path / "lake")
    done = subprocess.run(
        [str(gpuledger), "attribute", "--lake", lake, "--engine", "spark", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert error.startswith("Error: Spark did not start (master local[*]): [JAVA_GATEWAY_EXITED]")
    assert "is Java 17 installed" in error


@pytest.mark.slow
def test_bench_writes_its_results_as_json(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "b.json"
    work = tmp_path / "not" / "there"  # made by bench, as `--lake`'s folder
    # a site's configuration where bench runs: the "as a command" attribute read it (and failed
    # on this one) while the in-process run it is compared with uses the built-in defaults
    (tmp_path / "gpuledger.toml").write_text("[attribute]\nbucket_s = 7\n")
    monkeypatch.chdir(tmp_path)
    result = invoke(
        "bench",
        "--gpus",
        "16",
        "--days",
        "1",
        "--scenario",
        "attribution",
        "--scenario",
        "incremental",
        "--scenario",
        "dashboard",
        "--small-gpus",
        "8",
        "--small-days",
        "1",
        "--small-interval",
        "600",
        "--out",
        str(out),
        "--lake",
        str(work),
    )
    assert result.exit_code == 0, result.output
    assert "plain scan floor" in result.stdout and "pandas merge_asof" in result.stdout
    a = json.loads(out.read_text(encoding="utf-8"))["attribution"]
    assert a["samples"] > 0 and a["floor_scan_s"] > 0 and a["marts_s"] > 0
    # issue #24's first pass over an external lake: the same samples, none with a job_id
    ext = a["external_first_pass"]
    assert ext["samples"] == a["samples"] and ext["attribute_s"] > 0 and ext["floor_scan_s"] > 0
    assert ext["vs_floor"] == pytest.approx(ext["attribute_s"] / ext["floor_scan_s"])
    assert "first pass over an external lake" in result.stdout
    # and `gpuledger attribute` from scratch on a small lake, in process and as a command
    small = a["small_lake"]
    assert small["gpus"] == 8 and 0 < small["samples"] <= 8 * 144  # GPUs fail, gaps
    assert len(small["in_process_s"]) == len(small["command_s"]) == 2
    assert small["best_in_process_s"] == min(small["in_process_s"])
    assert small["best_command_cpu_s"] > 0 and "small lake: gpuledger attribute" in result.stdout
    assert a["marts_vs_floor"] == pytest.approx(a["marts_s"] / a["floor_scan_s"])
    assert a["pandas_merge_asof"]["total_s"] > 0 and a["polars_join_asof"]["total_s"] > 0
    inc = a["incremental"]
    assert inc["seconds"] > 0 and inc["ingest_day_s"] > 0
    assert inc["mode"] == "incremental", "the new day rebuilt the summary marts whole"
    assert inc["vs_marts"] == pytest.approx(inc["seconds"] / a["marts_s"])
    assert "incremental: mart update" in result.stdout
    assert 0 < inc["mart_sql_on_empty_s"] and "an update's fixed cost" in result.stdout
    late = inc["late_records"]
    assert late["jobs"] > 0 and late["mode"] == "incremental", "late records rebuilt whole"
    assert late["jobs_recomputed"] >= late["jobs"] and "incremental: late records" in result.stdout
    timed = {q["query"]: q for q in a["dashboard"]}
    assert "dashboard/cluster_summary" in timed and "seconds" in timed["dashboard/cluster_summary"]
    # detect ran first: the findings and recommendations views are timed on real rows
    assert a["detect"]["findings"] > 0 and a["detect"]["recommendations"] > 0
    assert timed["dashboard/findings_feed"]["rows"] > 0
    assert timed["dashboard/recommendation_list"]["rows"] > 0
    assert "detect (before the queries)" in result.stdout
    assert a["dashboard_pages"] and all(s > 0 for s in a["dashboard_pages"].values())
    assert "page: " in result.stdout
    assert list(work.iterdir()) == [], "bench left its lake behind"


def test_bench_replay_reports_seconds_jobs_per_second_and_peak_rss(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    result = invoke(
        "bench",
        "--scenario",
        "replay",
        "--replay-gpus",
        "32",
        "--replay-days",
        "2",
        "--out",
        str(out),
        "--lake",
        str(tmp_path / "work"),
    )
    assert result.exit_code == 0, result.output
    r = json.loads(out.read_text(encoding="utf-8"))["replay"]
    assert r["gpus"] == 32 and r["days"] == 2 and r["jobs"] > 50 and r["started"] > 0
    assert r["replay_s"] > 0 and r["jobs_per_s"] == pytest.approx(r["jobs"] / r["replay_s"])
    assert r["peak_rss_mb"] > 0 and "jobs/s" in result.stdout and "peak RSS" in result.stdout
    assert r["jobs_per_cpu_s"] == pytest.approx(r["jobs"] / r["replay_cpu_s"])
    assert r["cons_tres_replay_s"] > 0 and 0 < r["cons_tres_started"] <= r["jobs"]
    assert len(r["load_average"]) == 2 and r["peak_rss_within_2gb"] is True
    # 32 GPUs × 2 days is not one of the sizes: no target to meet or miss
    assert r["target_s"] is None and r["within_target_wall"] is None
    assert "load average" in result.stdout and "target" not in result.stdout
    assert list((tmp_path / "work").iterdir()) == [], "bench left its lake behind"


@pytest.mark.parametrize(
    ("speedup", "words"),
    [
        (27.4, "27× faster than pandas"),
        (1.27, "1.3× faster than pandas"),
        (0.9, "1.1× slower than pandas"),  # not "0.9× faster"
    ],
)
def test_bench_says_slower_when_a_baseline_wins(speedup: float, words: str) -> None:
    from app.bench.run import _against

    assert _against(speedup, "pandas") == words


def test_lake_comes_from_the_configuration_when_not_given(
    lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--lake, else $GPULEDGER_LAKE, else the config file's `lake`: as `report` and `run` do."""
    monkeypatch.chdir(tmp_path)  # ./gpuledger.toml is the default configuration file
    (tmp_path / "gpuledger.toml").write_text(f"lake = {str(lake)!r}\n", encoding="utf-8")
    result = invoke("query", "job_usage", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("cluster,job_id"), result.output
    elsewhere = tmp_path / "other"
    given = invoke("query", "job_usage", "--lake", str(elsewhere))
    _assert_one_line_error(given, 1, str(elsewhere))  # --lake still wins


def test_an_invalid_configuration_is_named_when_it_would_give_the_lake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuledger.toml").write_text("lake = [\n", encoding="utf-8")
    result = invoke("query", "job_usage")
    _assert_one_line_error(result, 2, "--lake", "gpuledger.toml")
    given = invoke("query", "job_usage", "--lake", str(tmp_path))  # the config is not read
    _assert_one_line_error(given, 1, str(tmp_path), "no table folders")
    assert "gpuledger.toml" not in given.output


def test_query_table_keeps_to_the_width_and_names_the_columns_left_out(lake: Path) -> None:
    from app.terminal_table import render

    frame = pl.read_parquet(sorted(lake.glob("job_usage/**/*.parquet")))
    text, left_out = render(frame, 3, width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert left_out and left_out == frame.columns[len(frame.columns) - len(left_out) :]
    assert "job_id" in text and left_out[0] not in text
    result = invoke("query", "job_usage", "--lake", str(lake), "--limit", "2")
    assert "did not fit" in result.stderr and "--columns" in result.stderr


def test_query_picks_columns_in_order(lake: Path) -> None:
    result = invoke(
        "query", "job_usage", "--lake", str(lake), "-c", "user,job_id", "--format", "csv"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "user,job_id"
    bad = invoke("query", "job_usage", "--lake", str(lake), "-c", "job_id,nope")
    _assert_one_line_error(bad, 2, "'nope'", "idle_gpu_h")
    # a column named twice is shown once (it was polars' DuplicateError traceback)
    twice = invoke(
        "query", "job_usage", "--lake", str(lake), "-c", "job_id,job_id", "--format", "csv"
    )
    assert twice.exit_code == 0, twice.output
    assert twice.stdout.splitlines()[0] == "job_id"


def test_query_without_a_name_lists_what_can_be_queried() -> None:
    result = invoke("query")
    assert result.exit_code == 0, result.output
    assert "  job_usage" in result.stdout and "    dashboard/top_users_by_idle" in result.stdout
    assert "attribution/" not in result.stdout  # the pipeline's own staging queries


def test_a_quoted_param_value_stays_text() -> None:
    from app.cli import _parse_param

    assert _parse_param("cluster=1") == ("cluster", 1)
    assert _parse_param('cluster="1"') == ("cluster", "1")
    assert _parse_param("user='null'") == ("user", "null")
    assert _parse_param("user=null") == ("user", None)


def test_bench_refuses_an_unwritable_out_or_lake_before_it_runs(tmp_path: Path) -> None:
    # a bad --out ran the whole bench, then lost it in a traceback; a --lake under a file was a
    # traceback too
    result = invoke("bench", "--scenario", "prometheus", "--out", str(tmp_path / "no" / "x.json"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "cannot write" in result.output and "no writable folder" in result.output
    (tmp_path / "file").write_text("")
    result = invoke("bench", "--scenario", "prometheus", "--lake", str(tmp_path / "file" / "sub"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "cannot make the bench's lakes under" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["detect", "--now", "1900-01-01"],  # stamped its findings 1900 for good
        ["simulate", "--start", "0001-01-01"],  # landed files outside any date folder
        ["simulate", "--start", "9999-12-31"],  # overflowed
        ["whatif", "replay", "--since", "1969-12-31"],
    ],
)
def test_a_time_outside_the_years_a_lake_can_hold_is_a_usage_error(tmp_path, args):
    result = CliRunner().invoke(cli, [*args, "--lake", str(tmp_path / "lake")])

    assert result.exit_code == 2, result.output
    assert "expected a year from 1970 to 9998" in result.output
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["report", "weekly", "--no-pdf", "--cost-per-gpu-hour", "nan"],  # "$nan" in the report
        ["report", "weekly", "--no-pdf", "--half-life-days", "nan"],
        ["collect", "slurm", "--cluster", "c", "--timeout", "nan"],  # a traceback
        ["alert", "--follow", "--interval", "nan"],
    ],
)
def test_a_number_that_is_no_number_is_a_usage_error(tmp_path, args):
    result = CliRunner().invoke(cli, [*args, "--lake", str(tmp_path / "lake")])

    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output


@pytest.mark.parametrize("args", [["prune", "--dry-run"], ["prune"], ["status"]])
def test_a_lake_that_is_not_there_is_an_error_not_a_success(tmp_path, args):
    # a cron line with a mistyped lake "succeeded" (exit 0) and never pruned
    result = CliRunner().invoke(cli, [*args, "--lake", str(tmp_path / "nope")])

    assert result.exit_code == 1, result.output
    assert "no lake at" in result.output and "nope" in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["simulate", "--seed", "-1"], "--seed"),  # numpy's traceback
        (["simulate", "--gpus", "99999999999999999999"], "--gpus"),  # 3.7 GB and counting
        (["evaluate", "--seeds", "100-99999999999"], "names more than 1,000 seeds"),
        (["query", "job_usage", "--limit", "99999999999999999999"], "--limit"),
    ],
)
def test_a_value_past_what_a_command_can_do_is_a_usage_error(tmp_path, args, said):
    result = CliRunner().invoke(cli, [*args, "--lake", str(tmp_path / "lake")])

    assert result.exit_code == 2, result.output
    assert said in result.output and "Traceback" not in result.output


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [["--version"], ["query"]])
def test_output_that_cannot_be_written_is_one_line_not_a_traceback(args):
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )

    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: cannot write the output (No space left on device)"
    ]


@pytest.mark.parametrize("args", [["status"], ["report", "weekly", "--no-pdf"]])
def test_a_config_named_beside_the_lake_is_read(tmp_path, args):
    # `--config` that is not TOML at all was ignored beside --lake (exit 0), where attribute,
    # detect, alert and prune refuse it
    bad = tmp_path / "bad.toml"
    bad.write_text("this is [not toml\n")
    (tmp_path / "lake").mkdir()
    result = CliRunner().invoke(
        cli, [*args, "--lake", str(tmp_path / "lake"), "--config", str(bad)]
    )

    assert result.exit_code == 1, result.output
    assert "is not valid TOML" in result.output


def test_a_recipient_that_is_no_address_is_refused_before_any_report(tmp_path):
    # `a@b\nBcc: x@y` was a ValueError traceback once the reports were written
    (tmp_path / "lake").mkdir()
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        ["report", "weekly", "--no-pdf", "--lake", str(tmp_path / "lake"), "--out", str(out)]
        + ["--email", "--email-to", "a@b\nBcc: x@y"],
        env={"GPULEDGER_CONFIG": ""},
    )

    assert result.exit_code == 2, result.output
    assert "not an email address" in result.output and not out.exists()
