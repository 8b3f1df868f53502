"""The `gpuledger` command line: one click group, one subcommand per pipeline step.

Each command imports its layer inside the function, so `gpuledger --help` and the light
commands never load duckdb, polars or streamlit.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack, closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.bench.scenarios import SCENARIOS as BENCH_SCENARIOS
from app.commands.config import config_option
from app.commands.registry import register
from app.errors import AppError, reports_errors
from app.files_out import write_parquet
from app.options import (
    ClusterName,
    Finite,
    NonEmptyPath,
    Timestamp,
    lake_option,
    lake_writer,
    no_wait_option,
    progress_bar,
)

if TYPE_CHECKING:
    import polars as pl

    from app.pipeline import PipelineConfig
    from warehouse.lake import Lake

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="gpuledger")
def cli() -> None:
    """gpuledger: where did our GPU-hours go, and what should we change?

    \b
    Typical first run (a simulated 256-GPU cluster, one week):
      gpuledger simulate --lake ./lake      # or collect: prometheus, dcgm-exporter, slurm …
      gpuledger attribute --lake ./lake     # samples → jobs → marts
      gpuledger detect --lake ./lake        # findings and policy recommendations
      gpuledger query job_usage --lake ./lake --format csv > jobs.csv
      gpuledger dashboard --lake ./lake
    or all of it at once:  gpuledger demo   (under a minute on 2 cores, then the dashboard)
    """


# ---------------------------------------------------------------- simulate


def _simulate(
    lake: Lake,
    gpus: int,
    days: int,
    seed: int,
    cluster: str,
    interval: int,
    start: dt.datetime | None,
    quiet: bool,
) -> None:
    from collector.sim import SimConfig, simulate
    from collector.sim.runner import DEFAULT_START

    if 86400 % interval:
        raise click.BadParameter(f"{interval!r} s does not divide a day", param_hint="--interval")
    cfg = SimConfig(
        cluster=cluster,
        gpus=gpus,
        days=days,
        seed=seed,
        interval_s=interval,
        start=start or DEFAULT_START,
    )
    cfg.validate()
    end = cfg.start + dt.timedelta(days=days)
    tomorrow = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)
    if end.date() > tomorrow + dt.timedelta(days=1):
        # `attribute` leaves samples dated after tomorrow out: they come from a wrong clock
        first = dt.datetime.combine(tomorrow + dt.timedelta(days=1 - days), dt.time(), dt.UTC)
        raise click.BadParameter(
            f"{days} day(s) from {cfg.start:%Y-%m-%d} run to {end:%Y-%m-%d}, past tomorrow: "
            "attribute leaves samples dated after tomorrow out (they come from a wrong clock); "
            f"start on {first:%Y-%m-%d} or earlier",
            param_hint="--start",
        )
    chunks = -(-max(gpus, 1) // 512)
    with progress_bar("Simulating telemetry", days * chunks, not quiet) as update:
        result = simulate(cfg, lake, progress=update)
    click.echo(
        f"Simulated cluster {cluster!r}: {result.gpus:,} GPUs, {result.jobs:,} jobs, "
        f"{result.samples:,} samples over {days} day(s) into {lake}",
        err=quiet,
    )


sim_options = [
    click.option(
        "--gpus",
        type=click.IntRange(min=1, max=65536),
        default=256,
        show_default=True,
        help="GPUs in the fleet (rounded up to whole 8-GPU nodes).",
    ),
    click.option(
        "--days",
        type=click.IntRange(min=1, max=366),
        default=7,
        show_default=True,
        help="Days of history to simulate.",
    ),
    click.option(
        "--seed",
        type=click.IntRange(min=0, max=2**32 - 1),
        default=42,
        show_default=True,
        help="Random seed; the same seed lands the same rows.",
    ),
]


def with_sim_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(sim_options):
        func = option(func)
    return func


@cli.command()
@lake_option
@with_sim_options
@click.option(
    "--cluster",
    type=ClusterName(),
    default="sim",
    show_default=True,
    help="Cluster name to land under.",
)
@click.option(
    "--interval",
    type=click.IntRange(1, 3600),
    default=30,
    show_default=True,
    help="Sampling interval in seconds (must divide a day).",
)
@click.option(
    "--start",
    type=Timestamp(),
    default=None,
    help="First simulated instant, UTC [default: 2026-11-02T00:00, a Monday].",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@reports_errors
def simulate(
    lake: Lake,
    gpus: int,
    days: int,
    seed: int,
    cluster: str,
    interval: int,
    start: dt.datetime | None,
    quiet: bool,
) -> None:
    """Simulate a GPU cluster with ground truth and land it in the lake.

    \b
    The fleet has nodes of 8 H100s (an A100 island above 128 GPUs), users in accounts with
    fair-share entitlements, a FCFS scheduler with queue waits, and the workloads an operator
    knows: LLM pre-training, fine-tuning, input-bound training, inference with a daily cycle,
    notebooks, idle and partially idle jobs, hung NCCL jobs, memory holders, oversized time
    limits, stragglers, a hot node and GPUs that degrade and fail. Every injected behaviour is
    in the sim_truth table. Re-running with the same options changes nothing; other options
    into a lake that holds the cluster are refused (the two runs' days and jobs would mix), and
    so is a cluster that holds another source's jobs or samples (an imported trace's).
    """
    _simulate(lake, gpus, days, seed, cluster, interval, start, quiet)


# ---------------------------------------------------------------- attribute


def _attribute(
    lake: Lake,
    config: PipelineConfig,
    quiet: bool,
    force: bool = False,
    since: dt.datetime | None = None,
    engine: str = "duckdb",
    spark_master: str | None = None,
    spark_source: str | None = None,
    no_wait: bool = False,
) -> None:
    from app.pipeline import attribute as run_attribute
    from warehouse.attribution import MART_ORDER

    for value, hint in ((spark_master, "--spark-master"), (spark_source, "--spark-source")):
        if value and engine != "spark":
            raise click.BadParameter("only with --engine spark", param_hint=hint)
    with lake_writer(lake, "attribute", no_wait), ExitStack() as bars:

        def phase(label: str, total: int) -> Callable[[int, int], None]:
            """A progress bar opened at its first update, closing the one before it."""
            opened: list[Callable[[int, int], None]] = []

            def update(done: int, of: int) -> None:
                if not opened:
                    bars.close()
                    opened.append(bars.enter_context(progress_bar(label, total, not quiet)))
                opened[0](done, of)

            return update

        days = phase("Building day partitions", 1)
        marts = phase("Building marts", len(MART_ORDER))
        done = run_attribute(
            lake,
            config,
            dt.datetime.now(dt.UTC),
            since=since,
            force=force,
            engine=engine,
            spark_master=spark_master,
            spark_source=spark_source,
            days_progress=days,
            marts_progress=marts,
        )
    days_line = (
        "the day partitions were up to date"
        if done.days_rebuilt + done.tails_rebuilt == 0
        else f"{done.days_rebuilt:,} day partition(s) built, "
        f"{done.tails_rebuilt:,} day(s) whose last buckets were built again"
    )
    if engine == "spark":
        days_line = "every partition built"
    if done.compacted:
        days_line += f"; {done.compacted:,} day partition(s) of small files compacted"
    click.echo(
        f"Attributed: {days_line}; marts ({engine}): "
        + ", ".join(f"{name} {rows:,} rows" for name, rows in done.counts.items()),
        err=quiet,
    )


@cli.command()
@config_option
@lake_option
@click.option(
    "--idle-below",
    type=Finite(0, 1),
    default=None,
    help="A sample is idle when its busy fraction is below this "
    "[default: attribute.idle_below of the configuration, 0.01].",
)
@click.option(
    "--bucket",
    type=click.IntRange(60, 86400),
    default=None,
    help="Occupancy bucket width in seconds (must divide a day) "
    "[default: attribute.bucket_s of the configuration, 300].",
)
@click.option(
    "--since",
    type=Timestamp(),
    default=None,
    help="Only build the day partitions, and compact small files, from this UTC day on; older "
    "days keep their derived partitions and their files as they are [default: every day whose "
    "inputs changed].",
)
@click.option(
    "--force", is_flag=True, help="Rebuild the marts even if nothing they read has changed."
)
@click.option(
    "--engine",
    type=click.Choice(["duckdb", "spark"]),
    default="duckdb",
    show_default=True,
    help="Build the marts with DuckDB (incremental, per day) or with Apache Spark (the same "
    "sql/ files transpiled by sqlglot; every mart rebuilt whole; needs the 'spark' extra).",
)
@click.option(
    "--spark-master",
    default=None,
    metavar="URL",
    help="Spark master, e.g. spark://host:7077 or yarn [default: local[*]].",
)
@click.option(
    "--spark-source",
    default=None,
    metavar="URL",
    help="Read the raw tables from this lake URL with Spark (e.g. s3a://bucket/lake) instead "
    "of --lake; the marts are still landed in --lake.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
@no_wait_option
@reports_errors
def attribute(
    config_path: Path | None,
    lake: Lake,
    idle_below: float | None,
    bucket: int | None,
    since: dt.datetime | None,
    force: bool,
    engine: str,
    spark_master: str | None,
    spark_source: str | None,
    quiet: bool,
    no_wait: bool,
) -> None:
    """Attribute samples to jobs and bring the marts up to date.

    \b
    Raw files are never rewritten: each sample's owner (the job whose allocation in job_gpus
    covers it) is decided as its day's partitions are built, and kept in the derived data.
    The sample-level marts (gpu_job_buckets, job_gpu_daily, job_energy_hourly, bucket_occupancy)
    are rebuilt only for the UTC days whose sample files or allocations changed (and the last
    buckets of the day before), so a late scheduler record rebuilds the days it covers;
    compacting files changes no row and rebuilds nothing. job_usage, job_outcomes, usage_daily,
    cluster_occupancy and fairness_weekly are then built from them (definitions: DESIGN.md §4).
    The scheduler's records alone (no telemetry yet) give the allocation figures, with nothing
    observed. Re-running with nothing changed changes nothing.
    The thresholds come from the configuration file's [attribute] table (idle_below,
    bucket_s, hw_event_grace_s, low_efficiency_below; `gpuledger config check` lists them),
    the one `gpuledger run` uses too; --idle-below and --bucket override it. The carbon
    intensity of each cluster (kg_co2e) comes from its [emissions] table.
    One writer at a time: beside `gpuledger run` or another attribute/detect, it waits for
    the other (naming it on stderr), or with --no-wait exits at once.
    Examples:
      gpuledger attribute --lake ./lake
      gpuledger attribute --lake ./lake --engine spark --spark-master spark://head:7077
    """
    from app.commands.detect import pipeline_and_lake

    if bucket is not None and 86400 % bucket:
        raise click.BadParameter(f"{bucket!r} does not divide a day", param_hint="--bucket")
    config, lake = pipeline_and_lake(config_path, lake, idle_below=idle_below, bucket_s=bucket)
    _attribute(lake, config, quiet, force, since, engine, spark_master, spark_source, no_wait)


# ---------------------------------------------------------------- query


def _parse_param(raw: str) -> tuple[str, object]:
    if "=" not in raw:
        raise click.BadParameter(f"{raw!r} is not KEY=VALUE", param_hint="--param")
    key, value = raw.split("=", 1)
    parsed: object = value
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        parsed = value[1:-1]  # quoted: text as it is (a cluster named 1, the word null)
    elif value.lower() in ("null", "none"):
        parsed = None
    else:
        for kind in (int, float):
            try:
                parsed = kind(value)
                break
            except ValueError:
                continue
    return key.strip(), parsed


# Shipped SQL folders that only the pipeline runs (their queries read its staging views).
_INTERNAL_SQL = ("attribution/", "bench/")


def _query_names(tables: list[str], shipped: tuple[str, ...]) -> str:
    """What `gpuledger query NAME` accepts, grouped: tables and views, then shipped queries."""
    lines = ["Tables and views:", *(f"  {t}" for t in tables), "", "Shipped queries (sql/):"]
    folder = None
    for name in shipped:
        if name.startswith(_INTERNAL_SQL):
            continue
        head, _, _ = name.rpartition("/")
        if head != folder:
            lines.append(f"  {head}/")
            folder = head
        lines.append(f"    {name}")
    return "\n".join(lines)


def _write_out(out: Path, write: Callable[[], object]) -> None:
    """Run `write`; a file that cannot be written is one clear line naming it."""
    try:
        write()
    except OSError as exc:
        raise AppError(
            f"cannot write {str(out)!r} ({exc.strerror or exc}); "
            "expected --out to be a file in a folder this user can write to"
        ) from exc


@cli.command()
@click.argument("name", required=False)
@lake_option
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="A $parameter of the query (repeatable); numbers are passed as numbers, 'null' as "
    "NULL, a quoted value as text (-p 'cluster=\"1\"').",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "parquet"]),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file instead of standard output (required for parquet).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=2**62),
    default=None,
    help="Show at most this many rows.",
)
@click.option(
    "--columns",
    "-c",
    metavar="A,B,…",
    default=None,
    help="Only these columns, in this order (comma-separated).",
)
@reports_errors
def query(
    name: str | None,
    lake: Lake,
    params: tuple[str, ...],
    fmt: str,
    out: Path | None,
    limit: int | None,
    columns: str | None,
) -> None:
    """Run a shipped query or read a table, and print the result.

    \b
    NAME is a table or view (job_usage, usage_daily, cluster_occupancy, jobs_latest, …) or a
    shipped SQL file by its path under sql/ (dashboard/top_users_by_idle, …); without NAME,
    every name is listed. A shipped query's $parameters are given with -p (an unknown or
    missing one is named in the error).
    Examples:
      gpuledger query                                   # what can be queried
      gpuledger query job_usage -c job_id,user,idle_gpu_h --limit 20
      gpuledger query job_usage --format csv --out jobs.csv
      gpuledger query dashboard/top_users_by_idle -p cluster=sim -p limit=10 \\
          -p start=null -p end=null
    """
    import sql
    from warehouse import queries
    from warehouse.connection import DERIVED_VIEWS, REFERENCE_VIEWS, quote_ident
    from warehouse.errors import EmptyWarehouse
    from warehouse.schema import TABLES

    readable = set(TABLES) | set(DERIVED_VIEWS) | set(REFERENCE_VIEWS)
    if name is None:
        click.echo(_query_names(sorted(readable), sql.names()))
        return
    values = dict(_parse_param(p) for p in params)
    if name not in readable and name not in sql.names():
        import difflib

        # the names the listing shows (not the pipeline's internal queries)
        public = sorted(readable) + [n for n in sql.names() if not n.startswith(_INTERNAL_SQL)]
        close = difflib.get_close_matches(name, public, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise click.BadParameter(
            f"{name!r} is neither a table nor a shipped query; {hint}known: {', '.join(public)}",
            param_hint="NAME",
        )
    if name in readable and values:
        raise click.BadParameter("tables take no --param", param_hint="--param")
    # a mistyped --lake would otherwise print an empty table and exit 0
    if not lake.exists():
        raise EmptyWarehouse(lake.root, "any table (the folder does not exist)")
    if not any(lake.table_dir(table).is_dir() for table in TABLES):
        raise EmptyWarehouse(lake.root, "any table (it holds no table folders; is --lake right?)")

    def read() -> pl.DataFrame:
        with closing(lake.connect()) as con:
            if name in readable:
                with queries.damaged_files(con):  # a file damaged inside: DamagedFile naming it
                    whole: pl.DataFrame = con.sql(f"SELECT * FROM {quote_ident(name)}").pl()
                    return whole  # (name: a closed set)
            return queries.run(con, name, **values)

    # read again when a collector or `attribute` replaced files under the read (a traceback)
    frame = lake.read_settled(read)
    if columns is not None:
        wanted = list(dict.fromkeys(c.strip() for c in columns.split(",") if c.strip()))
        unknown = [c for c in wanted if c not in frame.columns]
        if unknown or not wanted:
            raise click.BadParameter(
                f"no column {', '.join(map(repr, unknown)) or 'given'}; "
                f"{name} has: {', '.join(frame.columns)}",
                param_hint="--columns",
            )
        frame = frame.select(wanted)
    if limit is not None:
        frame = frame.head(limit)
    if fmt == "parquet":
        if out is None:
            raise click.BadParameter("parquet output needs --out FILE", param_hint="--out")
        _write_out(out, lambda: write_parquet(frame, out))
        click.echo(f"Wrote {frame.height:,} rows to {out}", err=True)
        return
    if fmt == "csv":
        import polars as pl

        # CSV holds no nested values: write lists (jobs.nodes) as comma-separated text
        nested = [c for c, t in frame.schema.items() if isinstance(t, pl.List)]
        if nested:
            frame = frame.with_columns(pl.col(nested).cast(pl.List(pl.String)).list.join(","))
        text = frame.write_csv()
    elif fmt == "json":
        from app.json_text import dumps

        text = dumps(frame.to_dicts())
    else:
        from app.terminal_table import render

        text, left_out = render(frame, 50 if limit is None else limit)
        if left_out:
            click.echo(
                f"{len(left_out)} more column(s) did not fit: {', '.join(left_out)} "
                "(pick some with --columns, or see all with --format csv or json)",
                err=True,
            )
    if out is not None:
        _write_out(out, lambda: out.write_text(text, encoding="utf-8"))
        click.echo(f"Wrote {frame.height:,} rows to {out}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))  # CSV already ends its last line


# ---------------------------------------------------------------- dashboard and demo


_STOP_WAIT_S = 10.0  # how long a stopping dashboard server may take before SIGTERM


def _check_listen(address: str, port: int) -> None:
    """AppError unless this machine can listen on `address`:`port` now (checked before the
    banner and, for `demo`, before its minute of work: Streamlit says so in a log line, or a
    traceback for an unknown address, and exits 0)."""
    import socket

    try:
        found = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise AppError(f"--address {address!r}: not an address to listen on ({reason})") from None
    family, kind, proto, _, where = found[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(where)
        except OSError as exc:
            raise AppError(
                f"cannot listen on {address}:{port} ({exc.strerror or exc}); is another "
                "dashboard using it? Give another --port"
            ) from None


def _serve_dashboard(lake: Lake, port: int, address: str) -> None:
    import importlib.util
    import os
    import signal
    import subprocess
    from importlib.resources import files

    if importlib.util.find_spec("streamlit") is None:
        raise AppError("the dashboard needs Streamlit: pip install 'gpuledger[dashboard]'")
    _check_listen(address, port)
    entry = Path(str(files("app").joinpath("streamlit_app.py")))
    env = dict(os.environ, GPULEDGER_LAKE=str(lake.root.resolve()))
    # Streamlit runs in the app's folder: hand it the ./gpuledger.toml this command was run
    # beside, so its [dashboard] section applies (an explicit $GPULEDGER_CONFIG passes as is).
    if not env.get("GPULEDGER_CONFIG") and Path("gpuledger.toml").is_file():
        env["GPULEDGER_CONFIG"] = str(Path("gpuledger.toml").resolve())
    click.echo(f"Dashboard on http://{address}:{port}  (Ctrl-C to stop)")
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(entry),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    server = subprocess.Popen(cmd, cwd=entry.parent, env=env)
    # `kill <our pid>` (a service manager, a test) must stop the server too, not orphan it
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: server.terminate())
    try:
        if server.wait() > 0:  # (a signal's stop is negative)
            raise AppError(
                f"the dashboard server stopped with exit status {server.returncode} (its "
                "output above says why)"
            )
    except KeyboardInterrupt:
        # A terminal's Ctrl-C reaches Streamlit too, but `kill -INT <our pid>` reaches only
        # us: pass it on (a second SIGINT is harmless), then wait for the server to stop
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            server.terminate()
            server.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


port_option = click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8501,
    show_default=True,
    help="Port to serve the dashboard on.",
)
address_option = click.option(
    "--address", default="127.0.0.1", show_default=True, help="Address to bind the dashboard to."
)


@cli.command()
@lake_option
@port_option
@address_option
@reports_errors
def dashboard(lake: Lake, port: int, address: str) -> None:
    """Serve the Streamlit dashboard over the lake (needs the 'dashboard' extra).

    \b
    Pages: Overview, Jobs, Job, Users & accounts, Fairness, Health, Alerts & recommendations,
    Policy lab (managers: a proposed scheduler change replayed beside the recorded policy);
    a cluster selector and a date range in the sidebar; CSV/Parquet downloads of every table.
    Access is open unless GPULEDGER_DASHBOARD_MANAGERS is set (comma-separated user names or
    e-mail addresses): then users sign in (OIDC via st.login, an [auth] section in
    .streamlit/secrets.toml next to app/streamlit_app.py), managers see every job and anyone
    else only their own. Whose sign-in counts: dashboard.allowed_domains, .allowed_issuers,
    .users (e-mail=user) and .user_claim; with none of the first three, nobody gets in.
    Keep the default address (localhost) behind a TLS reverse proxy.
    GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR sets the price shown (2.00).
    Example:  gpuledger dashboard --lake ./lake --port 8600
    """
    _serve_dashboard(lake, port, address)


@cli.command()
@lake_option
@with_sim_options
@click.option("--no-dashboard", is_flag=True, help="Exit after the summary.")
@port_option
@address_option
@reports_errors
def demo(
    lake: Lake, gpus: int, days: int, seed: int, no_dashboard: bool, port: int, address: str
) -> None:
    """Simulate a cluster, attribute it, detect waste, print a summary and serve the dashboard.

    The whole pipeline on an embedded default (256 simulated GPUs for one week: 28 nodes of 8
    H100 and 4 of 8 A100): simulate, attribute, detect (findings and policy recommendations) —
    under a minute on 2 cores — then the dashboard on http://ADDRESS:PORT until Ctrl-C.
    Re-running it gives the same lake; other --gpus/--days/--seed need another --lake.

    \b
    Examples:
      gpuledger demo                                   # ./lake, http://127.0.0.1:8501
      gpuledger demo --lake /tmp/lake --port 8600 --no-dashboard
    """
    from app.pipeline import default_pipeline_config, detect
    from app.summary import render_summary

    # the built-in defaults, whatever a configuration file says: the demo is the same everywhere
    config = default_pipeline_config()
    if not no_dashboard:  # a port in use is said now, not after a minute of work
        _check_listen(address, port)
    _simulate(lake, gpus, days, seed, "sim", 30, None, quiet=False)
    _attribute(lake, config, quiet=False)
    click.echo("detect: waste and health rules, bottlenecks, policy recommendations …", err=True)
    found = detect(lake, config, dt.datetime.now(dt.UTC))
    click.echo()
    click.echo(render_summary(lake.connect(require=("job_usage",))))
    click.echo(
        f"Findings: {found.findings.num_rows:,}; recommendations: "
        f"{found.recommendations:,}. Details: gpuledger detect / gpuledger job JOBID."
    )
    if not no_dashboard:
        click.echo()
        _serve_dashboard(lake, port, address)


# ---------------------------------------------------------------- bench


def _divides_a_day(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    """`value` (seconds between samples) if it divides a day, else one clear error line."""
    if 86400 % value:
        raise click.BadParameter(
            f"{value} s does not divide a day (86,400 s); try 10, 15, 30 or 60"
        )
    return value


@cli.command()
@click.option(
    "--scenario",
    "scenarios",
    type=click.Choice(list(BENCH_SCENARIOS)),
    multiple=True,
    help="A scenario to run (repeatable) [default: attribution, incremental, dashboard, "
    "prometheus]. attribution: the marts vs "
    "a plain scan, polars join_asof and pandas merge_asof; incremental: one more day lands; "
    "dashboard: every dashboard and report query; scale: a large synthetic lake, wall time "
    "and peak memory; prometheus: Prometheus JSON → Parquet; replay: the policy lab's scheduler "
    "replay of the simulator's jobs; jobstats: gpuledger against jobstats-style per-job PromQL "
    "on a real Prometheus (needs prometheus and promtool); history: one more day appended to "
    "7, 28 and 365 days of history.",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=8),
    default=1024,
    show_default=True,
    help="GPUs in the simulated fleet of attribution, incremental and dashboard.",
)
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="Days of samples of that fleet (incremental simulates one more).",
)
@click.option(
    "--scale-gpus",
    type=click.IntRange(min=8),
    default=4096,
    show_default=True,
    help="GPUs of the synthetic scale lake.",
)
@click.option(
    "--scale-days",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Days of the synthetic scale lake.",
)
@click.option(
    "--scale-interval",
    type=click.IntRange(min=1, max=3600),
    default=30,
    show_default=True,
    callback=_divides_a_day,
    help="Seconds between the scale lake's samples (must divide a day; 10 with "
    "--scale-gpus 10000 --scale-days 1 is issue #24's 86 M-sample day).",
)
@click.option(
    "--replay-gpus",
    type=click.IntRange(min=8),
    default=1024,
    show_default=True,
    help="GPUs of the replay scenario's simulated cluster (10000 for the large target).",
)
@click.option(
    "--replay-days",
    type=click.IntRange(min=1, max=366),
    default=30,
    show_default=True,
    help="Days of the replay scenario's jobs.",
)
@click.option(
    "--jobstats-gpus",
    type=click.IntRange(min=8),
    default=16,
    show_default=True,
    help="GPUs of the jobstats scenario's Prometheus history (15 s, every 4.8 family).",
)
@click.option(
    "--jobstats-days",
    type=click.IntRange(min=1, max=30),
    default=1,
    show_default=True,
    help="Days of that history.",
)
@click.option(
    "--history-gpus",
    type=click.IntRange(min=8),
    default=8,
    show_default=True,
    help="GPUs of the history scenario's synthetic lakes.",
)
@click.option(
    "--history-days",
    default="7,28,365",
    show_default=True,
    metavar="N,N,…",
    help="The history lengths (days) one more day is appended to.",
)
@click.option(
    "--small-gpus",
    type=click.IntRange(min=0),
    default=64,
    show_default=True,
    help="GPUs of the attribution scenario's small lake (issue #24's lake of under a million "
    "samples, attributed from scratch in process and as a command; 0: skipped).",
)
@click.option(
    "--small-days",
    type=click.IntRange(min=1, max=30),
    default=2,
    show_default=True,
    help="Days of the small lake.",
)
@click.option(
    "--small-interval",
    type=click.IntRange(min=1, max=3600),
    default=15,
    show_default=True,
    callback=_divides_a_day,
    help="Seconds between the small lake's samples (must divide a day).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("bench-results.json"),
    show_default=True,
    help="Where to write the results as JSON.",
)
@click.option(
    "--lake",
    "workdir",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=None,
    help="Folder to build the throw-away bench lakes in (default: the system's temporary "
    "folder); they are removed afterwards.",
)
@reports_errors
def bench(
    scenarios: tuple[str, ...],
    gpus: int,
    days: int,
    scale_gpus: int,
    scale_days: int,
    scale_interval: int,
    replay_gpus: int,
    replay_days: int,
    jobstats_gpus: int,
    jobstats_days: int,
    history_gpus: int,
    history_days: str,
    small_gpus: int,
    small_days: int,
    small_interval: int,
    out: Path,
    workdir: Path | None,
) -> None:
    """Time attribution against in-process baselines, at scale, incrementally, and the dashboard.

    \b
    Each scenario runs in this process on its own throw-away lake, with its baselines:
      attribution  1,024 GPUs × 7 days (simulated): the marts vs a plain DuckDB scan of the
                   same sample columns (the floor), polars join_asof and pandas merge_asof;
                   the first attribution of the same lake as another tool wrote it (samples
                   without job_id) vs its floor (target ≤ 8×); `gpuledger attribute` from
                   scratch on a small lake, 64 GPUs × 2 days at 15 s (~0.73 M samples), in
                   process and as a command (target ≤ 1 s)
      incremental  one more day of samples lands on that lake: its ingest pass, then the
                   summary marts updated in place (vs the attribution time)
      dashboard    every query under sql/dashboard/ and sql/report*/ on that lake
      scale        4,096 GPUs × 30 days at 30 s (synthetic, drawn from the simulator's
                   distributions, ~350 M samples): generation, then attribution from
                   scratch, wall time and peak RSS; 10,000 GPUs × 1 day at 10 s (86 M
                   samples): --scale-gpus 10000 --scale-days 1 --scale-interval 10
      prometheus   Prometheus range-query JSON (generated bodies of the DCGM families) to
                   Parquet vs prometheus-api-client's MetricRangeDataFrame
      replay       the simulator's jobs on 1,024 GPUs × 30 days (no telemetry) replayed under
                   the recorded policy: seconds, jobs/s, peak RSS (--replay-gpus 10000 for
                   the large target)
      jobstats     16 GPUs × 1 day at 15 s in a real Prometheus (promtool-loaded): the
                   peer's 3 PromQL queries per job vs gpuledger's collect + attribute +
                   read, and `gpuledger job` vs the peer's queries for one job
      history      one more day appended to synthetic lakes of 7, 28 and 365 days on 8
                   GPUs (the same GPUs and jobs a day): `gpuledger attribute`'s update at
                   each, (a) the new day's ingest and (b) the mart update timed apart
                   (target: (a) + (b) within 1.5× from 7 to 365 days)
    Example:  gpuledger bench --scenario attribution --gpus 256 --days 2
    """
    from app.bench.run import DEFAULT_SCENARIOS, BenchPlan, render_bench, run_bench

    # a results file that cannot be written is said before the run, not after it
    folder = out.parent if str(out.parent) else Path(".")
    if out.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
        raise click.BadParameter(
            f"cannot write {str(out)!r}: "
            + ("it is a folder" if out.is_dir() else f"no writable folder {str(folder)!r}"),
            param_hint="--out",
        )
    plan = BenchPlan(
        scenarios=scenarios or DEFAULT_SCENARIOS,
        gpus=gpus,
        days=days,
        scale_gpus=scale_gpus,
        scale_days=scale_days,
        scale_interval=scale_interval,
        replay_gpus=replay_gpus,
        replay_days=replay_days,
        jobstats_gpus=jobstats_gpus,
        jobstats_days=jobstats_days,
        history_gpus=history_gpus,
        history_days=_history_days(history_days),
        small_gpus=small_gpus,
        small_days=small_days,
        small_interval=small_interval,
        workdir=workdir,
    )
    results = run_bench(plan, echo=lambda m: click.echo(m, err=True))
    click.echo(render_bench(results))  # shown first: a write that fails keeps the run's table
    _write_out(out, lambda: out.write_text(json.dumps(results, indent=2, default=str)))
    click.echo(f"Results written to {out}", err=True)


def _history_days(text: str) -> tuple[int, ...]:
    try:
        days = tuple(int(part) for part in text.split(","))
    except ValueError:
        days = ()
    if len(days) < 2 or min(days) < 1:
        raise click.BadParameter(
            f"{text!r} is not two or more day counts, e.g. 7,28,365", param_hint="--history-days"
        )
    return days


def main() -> None:
    """Console entry point. Output that cannot be written (a full disk behind `> file`) is one
    line on stderr and exit 1, not a traceback from every command that prints; so is a file
    or folder the system refused that no command said more of (a --lake path too long, a
    folder that is not there or not writable, a read-only disk)."""
    try:
        cli()
    except OSError as exc:
        if exc.filename is not None and not _shipped(exc.filename):
            _said_on_stderr(f"Error: {_named(exc)}", keep_stdout=True)
            sys.exit(1)
        if exc.errno not in _FULL:
            raise
        _said_on_stderr(f"Error: cannot write the output ({exc.strerror or exc})")
        sys.exit(1)


# gpuledger's own files (its SQL, its modules, its data): one of them missing or unreadable
# is a broken install or a bug, whose traceback says where; any other path is the user's
_SHIPPED = tuple(
    Path(__file__).resolve().parents[1] / name
    for name in ("app", "collector", "detectors", "sql", "warehouse")
)


def _shipped(name: object) -> bool:
    if not isinstance(name, str | bytes | os.PathLike):
        return False
    try:
        path = Path(os.fsdecode(name)).resolve()
    except (ValueError, OSError):
        return False
    return any(path.is_relative_to(root) for root in _SHIPPED)


def _named(exc: OSError) -> str:
    """`exc`'s path(s) and the system's reason, e.g. `'/x/y': No such file or directory`."""

    def path(name: object) -> str:
        return os.fsdecode(name) if isinstance(name, str | bytes | os.PathLike) else str(name)

    where = repr(path(exc.filename))
    if exc.filename2 is not None:  # (a rename, a link)
        where += f" -> {path(exc.filename2)!r}"
    return f"{where}: {exc.strerror or exc}"


_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _said_on_stderr(line: str, keep_stdout: bool = False) -> None:
    """`line` on stderr, where it can be written; the unwritten rest of stdout is let go (its
    flush at exit would fail again, with "Exception ignored") unless `keep_stdout` (stdout
    was not what failed)."""
    try:
        click.echo(line, err=True)
    except OSError:
        pass
    if keep_stdout:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


register(cli)


if __name__ == "__main__":
    main()
