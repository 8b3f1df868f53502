"""`gpuledger collect prometheus`: pull dcgm-exporter telemetry out of Prometheus into the lake.

Exported as `command_prometheus` (and `command`, for the `collect` group's loader). The collector
layer and prometheus-api-client are imported inside the function, so `--help` stays light.
`python -m app.commands.prometheus …` runs the same command on its own.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from app.commands.config import config_option
from app.errors import reports_errors
from app.options import ClusterName, lake_option

if TYPE_CHECKING:
    from collector.sources.prometheus.pull import PullSummary, WindowLanded
    from warehouse.lake import Lake

__all__ = ["Duration", "When", "command", "command_prometheus", "render_summary"]

_UNITS: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)?")


def _seconds(text: str) -> float | None:
    found = _DURATION.fullmatch(text.strip())
    return None if found is None else float(found.group(1)) * _UNITS[found.group(2) or "s"]


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A duration: `90s`, `10m`, `1h`, `1d`, or plain seconds."""

    name = "duration"

    def __init__(self, *, allow_zero: bool = False, most: float | None = None) -> None:
        self.allow_zero = allow_zero
        self.most = most

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        seconds = float(value) if isinstance(value, int | float) else _seconds(str(value))
        if seconds is None or seconds < 0 or (seconds == 0 and not self.allow_zero):
            self.fail(f"{value!r} is not a duration (e.g. 90s, 10m, 1h, 1d)")
        if self.most is not None and seconds > self.most:
            self.fail(f"{value!r} is more than {self.most:g} s")
        return seconds


class When(click.ParamType):  # type: ignore[type-arg]
    """A point in time: ISO date/time (UTC unless an offset is given), `now`, epoch seconds
    (`@1767225600`), or a duration ago (`6h`, `2d`)."""

    name = "time"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> dt.datetime:
        if isinstance(value, dt.datetime):
            return value
        text = str(value).strip()
        now = dt.datetime.now(dt.UTC)
        if text == "now":
            return now
        if text.startswith("@"):
            try:
                return dt.datetime.fromtimestamp(float(text[1:]), tz=dt.UTC)
            except (ValueError, OverflowError):
                self.fail(f"{value!r} is not @<epoch seconds>")
        ago = _seconds(text) if text[-1:].isalpha() else None
        if ago is not None:
            return now - dt.timedelta(seconds=ago)
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            self.fail(
                f"{value!r} is not a time: expected ISO (2026-11-02T08:00), @epoch, now, "
                "or a duration ago (6h, 2d)"
            )
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _when(ts: dt.datetime | None) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def render_summary(summary: PullSummary, lake: Lake, *, throughput: bool = False) -> str:
    """What the pull landed, what it skipped by reason, and where the checkpoint stands.

    `throughput`: throughput queries were configured (say how many app_throughput rows landed).
    """
    lines = [
        f"Landed {summary.samples:,} gpu_samples row(s), {summary.events:,} gpu_events row(s) "
        f"and {summary.job_gpus:,} job_gpus row(s) from {summary.windows} window(s) "
        f"({_when(summary.first)} to {_when(summary.last)} UTC, "
        f"{len(summary.families)} DCGM famil{'y' if len(summary.families) == 1 else 'ies'}) "
        f"into {lake}",
        *([f"Landed {summary.throughput:,} app_throughput row(s)"] if throughput else []),
        "Values skipped or nulled, by reason: "
        + (", ".join(f"{k} {n:,}" for k, n in sorted(summary.counts.items())) or "none"),
        f"Checkpoint: complete up to {_when(summary.checkpoint)} UTC"
        + (" (stopped by signal)" if summary.stopped else ""),
    ]
    if summary.nothing_to_pull and not summary.windows:
        lines.insert(1, summary.nothing_to_pull + ".")
    elif not summary.families:
        lines.insert(
            1, "No DCGM metric families matched in that range (check --url and --selector)."
        )
    return "\n".join(lines)


def _progress(window: WindowLanded) -> None:
    state = "complete" if window.complete else "open"
    click.echo(
        f"{window.start:%Y-%m-%d %H:%M}–{window.end:%H:%M} UTC  {window.samples:>9,} rows  "
        f"{window.events:>5,} events  {window.job_gpus:>5,} job_gpus  "
        + (f"{window.throughput:>5,} app_throughput  " if window.throughput else "")
        + state
        + (f"  [{window.done}/{window.total}]" if window.total else ""),
        err=True,
    )


def _url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from collector.errors import ConfigError
    from collector.sources.prometheus.transport import check_base_url

    try:
        check_base_url(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


@click.command(name="prometheus")
@click.option(
    "--url",
    required=True,
    callback=_url,
    help="Prometheus base URL, e.g. http://prometheus:9090.",
)
@click.option(
    "--cluster", type=ClusterName(), required=True, help="Cluster name the rows land under."
)
@click.option(
    "--selector",
    default="",
    metavar="MATCHERS",
    help='Label matchers added to every query, e.g. cluster="a",job="dcgm" '
    "(default: every DCGM series Prometheus holds).",
)
@click.option(
    "--since",
    type=When(),
    default=None,
    help="Start: ISO time (UTC), @epoch, or a duration ago (6h, 2d). Default: where the last "
    "run's checkpoint is, else 1h ago.",
)
@click.option(
    "--until",
    type=When(),
    default=None,
    help="End (same forms). Without it the pull follows live data until Ctrl-C / SIGTERM.",
)
@click.option(
    "--window",
    type=Duration(),
    default="1h",
    show_default=True,
    help="Window per query and per landed batch; must divide a day. Keep it for a cluster.",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 16),
    default=4,
    show_default=True,
    help="Queries in flight at once.",
)
@click.option(
    "--timeout",
    type=Duration(),
    default="60s",
    show_default=True,
    help="Per request (also Prometheus' own query timeout).",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=4,
    show_default=True,
    help="Retries of a failed request, with exponential backoff.",
)
@click.option(
    "--backoff",
    type=Duration(allow_zero=True),
    default="1s",
    show_default=True,
    help="First retry delay.",
)
@click.option(
    "--poll",
    type=Duration(),
    default="30s",
    show_default=True,
    help="How often to look for new data when following (no --until).",
)
@click.option(
    "--settle",
    type=Duration(allow_zero=True),
    default="60s",
    show_default=True,
    help="How old a window's end must be before the checkpoint may pass it.",
)
@click.option(
    "--interval",
    # (above an hour a span is no sampling step, and the marts take it for none)
    type=Duration(most=3600),
    default=None,
    help="Seconds each sample stands for, at most 3600 (default: measured from the samples' "
    "spacing).",
)
@click.option(
    "--throughput-query",
    "throughput_queries",
    multiple=True,
    metavar="NAME=SELECTOR",
    help="Application throughput counter to pull alongside DCGM into app_throughput "
    "(repeatable; NAME is samples, tokens or steps, or model_params for the gauge of the "
    "model's parameter count, which gives job_usage its MFU), e.g. "
    "tokens=gpuledger_app_tokens_total. The selector is used as given (--selector is not "
    "added to it).",
)
@click.option(
    "--throughput-job-label",
    default="job_id",
    show_default=True,
    metavar="LABEL",
    help="Label of the throughput series naming the job (e.g. hpc_job, slurm_job_id, pod); "
    "series without it are skipped and counted.",
)
@click.option(
    "--columns",
    default="read",
    show_default=True,
    metavar="read|all|COLUMNS",
    help="Which gpu_samples columns to fill, hence which DCGM families to pull: read (the "
    "columns gpuledger's marts, detectors, reports and health events read: all but "
    "sm_occupancy, fb_free_mib, mem_temp_c and mem_clock_mhz), all (every column a DCGM "
    "family maps to), or column names separated by commas, e.g. gpu_util_pct,power_w,energy_j.",
)
@click.option(
    "--protocol",
    type=click.Choice(["auto", "remote-read", "json"]),
    default="auto",
    show_default=True,
    help="How samples are read: remote-read (/api/v1/read: Prometheus ships its stored chunks, "
    "several windows a request; far less CPU on both sides), json (/api/v1/query with range "
    "selectors, one request per window and family), or auto (remote read where the server "
    "streams chunks, else JSON). Both land identical rows.",
)
@click.option("--reset", is_flag=True, help="Ignore the checkpoint and start at --since.")
@click.option("--insecure", is_flag=True, help="Do not verify Prometheus' TLS certificate.")
@click.option("--quiet", is_flag=True, help="No per-window progress lines on stderr.")
@config_option
@lake_option
@reports_errors
def command_prometheus(
    url: str,
    cluster: str,
    selector: str,
    since: dt.datetime | None,
    until: dt.datetime | None,
    window: float,
    parallel: int,
    timeout: float,
    retries: int,
    backoff: float,
    poll: float,
    settle: float,
    interval: float | None,
    throughput_queries: tuple[str, ...],
    throughput_job_label: str,
    columns: str,
    protocol: str,
    reset: bool,
    insecure: bool,
    quiet: bool,
    config_path: Path | None,
    lake: Lake,
) -> None:
    """Pull DCGM telemetry (dcgm-exporter ≤4.8 and ≥4.9 names) from Prometheus into the lake.

    Raw scraped samples are read window by window (never resampled): by remote read, which
    ships Prometheus' stored chunks, or with range selectors through the JSON API (--protocol).
    Only the families of --columns are pulled (by default, those of the columns read downstream).
    They are pivoted to one gpu_samples row per GPU or MIG instance per scrape, with hpc_job / pod
    labels as job_gpus intervals and XID, ECC, row-remap and throttle changes as gpu_events.
    With --throughput-query, application counters (samples/tokens/steps per job) are pulled
    the same way into app_throughput, one row per job, reporter (instance) and scrape.
    A checkpoint in <lake>/_state/prometheus.sqlite lets a rerun resume; re-pulled windows
    replace what they landed before, so nothing is duplicated.

    Behind basic auth or a bearer-token proxy, the credentials come from the configuration's
    [prometheus] section: username plus password_file (or GPULEDGER_PROMETHEUS_PASSWORD), or
    bearer_token_file (or GPULEDGER_PROMETHEUS_BEARER_TOKEN); a user:password@ in --url works
    too. They are never printed: every URL is shown without its user:password@.

    \b
    Examples:
      gpuledger collect prometheus --url http://prom:9090 --cluster della --since 7d --until now
      gpuledger collect prometheus --url http://prom:9090 --cluster della   # follow live
    """
    from app.config import load_config
    from app.service.settings import PrometheusConfig
    from collector.errors import ConfigError
    from collector.sources.dcgm_exporter.scrape import stop_on_signals
    from collector.sources.prometheus.columns import parse_columns
    from collector.sources.prometheus.pull import PullConfig, pull
    from collector.sources.prometheus.remote_read import parse_selector
    from collector.sources.prometheus.throughput import parse_throughput_query
    from collector.sources.prometheus.transport import ApiClientTransport

    if window != int(window):
        raise click.BadParameter(
            f"{window:g} s is not a whole number of seconds", param_hint="--window"
        )
    if since and until and until <= since:
        raise click.BadParameter("must be after --since", param_hint="--until")
    try:
        throughput = tuple(parse_throughput_query(q) for q in throughput_queries)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--throughput-query") from exc
    try:
        wanted = parse_columns(columns)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--columns") from exc
    if protocol == "remote-read":
        try:
            parse_selector(selector.strip().strip("{}"))
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--selector") from exc
    cfg = PullConfig(
        cluster=cluster,
        selector=selector.strip().strip("{}"),
        since=since,
        until=until,
        window_s=int(window),
        parallel=parallel,
        retries=retries,
        backoff_s=backoff,
        poll_s=poll,
        settle_s=settle,
        interval_s=interval,
        throughput=throughput,
        throughput_job_label=throughput_job_label.strip(),
        columns=wanted,
        protocol=protocol,
        reset=reset,
    )
    auth = load_config(config_path).section(PrometheusConfig).auth()
    stop = threading.Event()
    with (
        ApiClientTransport(
            url, timeout_s=timeout, insecure=insecure, connections=parallel, auth=auth
        ) as api,
        stop_on_signals(stop),
    ):
        summary = pull(cfg, lake, api, stop=stop, progress=None if quiet else _progress)
    click.echo(render_summary(summary, lake, throughput=bool(throughput)))


command = command_prometheus

if __name__ == "__main__":
    command_prometheus(prog_name=f"{Path(sys.executable).name} -m app.commands.prometheus")
