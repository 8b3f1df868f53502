"""The `[service]` section and the `[[sources]]` list of `gpuledger run`'s configuration.

```toml
[service]
metrics_port = 9746          # /metrics and /healthz; 0 turns the endpoint off
pipeline_every_s = 60        # attribute → detect → alert
step_deadline_intervals = 30 # a step past 30 of its intervals is stuck: /healthz fails

[[sources]]
kind = "prometheus"          # prometheus | dcgm-exporter | slurm | kubernetes
cluster = "della"
url = "http://prometheus:9090"
selector = 'job="dcgm"'
```
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.config import (
    ConfigError,
    Secret,
    convert_setting,
    register_list_section,
    register_section,
    setting,
)
from app.service.tasks import (
    ExporterSource,
    KubernetesSource,
    PrometheusSource,
    SlurmSource,
    Source,
)
from collector.names import valid_name
from collector.sources.http_url import redact_url, redact_urls
from warehouse.layout import MAX_CLUSTER_NAME

if TYPE_CHECKING:
    from collector.sources.prometheus.transport import PrometheusAuth

__all__ = [
    "SOURCE_KINDS",
    "PrometheusConfig",
    "ServiceConfig",
    "credential_problems",
    "parse_sources",
]

SOURCE_KINDS: dict[str, type[Any]] = {
    "prometheus": PrometheusSource,
    "dcgm-exporter": ExporterSource,
    "slurm": SlurmSource,
    "kubernetes": KubernetesSource,
}


def _port_or_off(v: int) -> str | None:
    return None if 0 <= v <= 65535 else "expected a port number 1-65535, or 0 for none"


# the longest wait a step or round may be given (a year): past it a timer overflows, and the
# thread that sleeps it dies (1e12 s passed the check and ended the pipeline's thread)
MAX_SECONDS = 365 * 86400.0


def _positive(v: float) -> str | None:
    if not math.isfinite(v) or not 0 < v <= MAX_SECONDS:
        return f"expected seconds above 0, at most {MAX_SECONDS:,.0f} (a year)"
    return None


@register_section("service")
@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """How `gpuledger run` runs: its endpoint and the pipeline's cadence."""

    metrics_address: str = setting(
        "127.0.0.1", "Address of the /metrics and /healthz endpoint (0.0.0.0 for all)."
    )
    metrics_port: int = setting(9746, "Port of /metrics and /healthz; 0: none.", _port_or_off)
    pipeline_every_s: float = setting(
        60.0, "Seconds between rounds of attribute → detect → alert.", _positive
    )
    detect: bool = setting(True, "Run the detectors in each round.")
    recommend_every_s: float = setting(
        3600.0,
        "Seconds between the rounds whose detect also replays the policy recommendations (they "
        "weigh weeks of jobs, and their replays are most of a detect); the rounds between "
        "keep the last ones. At or below pipeline_every_s: every round.",
        _positive,
    )
    alert: bool = setting(True, "Deliver alerts for new findings in each round.")
    step_deadline_intervals: float = setting(
        30.0,
        "A step running longer than this many of its task's intervals (30 × 60 s: 30 min) is "
        "asked to stop and reported stuck: /healthz and `gpuledger status` fail, naming it.",
        _positive,
    )
    stop_timeout_s: float = setting(
        300.0, "On SIGTERM, how long to wait for running steps to finish.", _positive
    )


@register_section("prometheus")
@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """How to log in to Prometheus: `gpuledger collect prometheus` and every prometheus source."""

    username: str | None = setting(None, "Prometheus basic-auth user; none means no basic auth.")
    password: Secret | None = setting(
        None, "Prometheus basic-auth password (env or password_file only).", secret=True
    )
    bearer_token: Secret | None = setting(
        None,
        "Prometheus bearer token, sent as Authorization: Bearer (env or bearer_token_file only).",
        secret=True,
    )

    def validate(self) -> str | None:
        """Cross-key checks; returns `key: problem` or None."""
        if self.password is not None and not self.username:
            return "username: a Prometheus password is set but no username to log in with"
        if self.bearer_token is not None and self.username:
            return "bearer_token: give either username/password or a bearer token, not both"
        return None

    def auth(self) -> PrometheusAuth | None:
        """The credentials for the transport, or None when none are configured."""
        from collector.sources.prometheus.transport import PrometheusAuth

        if not self.username and self.bearer_token is None:
            return None
        return PrometheusAuth(
            username=self.username,
            password=self.password.reveal() if self.password is not None else None,
            bearer_token=self.bearer_token.reveal() if self.bearer_token is not None else None,
        )


def credential_problems(sources: tuple[Source, ...], prometheus: PrometheusConfig) -> list[str]:
    """The prometheus sources whose URL carries a `user:password@` while `[prometheus]` has
    credentials too, one line each: the transport refuses such a pair (one place for them), so
    the service would fail every round rather than start."""
    from collector.sources.http_url import split_credentials

    if not prometheus.username and prometheus.bearer_token is None:  # (as `auth` says None)
        return []
    return [
        f"sources[{index}].url: {redact_url(source.url)!r} carries a user:password@ and "
        "[prometheus] sets credentials too; keep them in one place (the password_file / "
        "bearer_token_file settings)"
        for index, source in enumerate(sources)
        if isinstance(source, PrometheusSource)
        and split_credentials(source.url)[1:] != (None, None)
    ]


def _source(index: int, item: Any, where: str) -> Source:
    at = f"sources[{index}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{at}: expected a table {where}, got {item!r}")
    kind = item.get("kind")
    if kind not in SOURCE_KINDS:
        raise ConfigError(
            f"{at}.kind: expected one of {', '.join(SOURCE_KINDS)} {where}, got {kind!r}"
        )
    cls = SOURCE_KINDS[kind]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, raw in item.items():
        if key == "kind":
            continue
        if key not in fields:
            raise ConfigError(
                f"{at}.{key}: unknown key for a {kind} source {where}; "
                f"known: {', '.join(sorted(fields))}"
            )
        try:
            kwargs[key] = convert_setting(hints[key], raw)
        except ValueError as exc:
            raise ConfigError(f"{at}.{key}: {exc} {where}") from None
    missing = [
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and name not in kwargs
    ]
    if missing:
        raise ConfigError(f"{at}.{missing[0]}: required for a {kind} source {where}")
    if not str(kwargs["cluster"]).strip():
        raise ConfigError(f"{at}.cluster: must not be empty {where}")
    if len(str(kwargs["cluster"])) > MAX_CLUSTER_NAME:
        raise ConfigError(f"{at}.cluster: longer than {MAX_CLUSTER_NAME} characters {where}")
    for key in ("every_s", "timeout_s"):  # (a wait no timer takes failed every round)
        if key in kwargs and _positive(kwargs[key]):
            raise ConfigError(f"{at}.{key}: {_positive(kwargs[key])} {where}, got {kwargs[key]!r}")
    if kind == "dcgm-exporter" and float(kwargs.get("every_s", 0)) > 3600:
        # each row stands for every_s: above an hour it is no sampling step, and the marts
        # would take every row for none (sql/views/sample_steps.sql)
        raise ConfigError(
            f"{at}.every_s: expected at most 3600 s for a dcgm-exporter source (each row "
            f"stands for it) {where}, got {kwargs['every_s']!r}"
        )
    settle = kwargs.get("settle_s", 0.0)
    if not math.isfinite(settle) or not 0 <= settle <= MAX_SECONDS:
        raise ConfigError(f"{at}.settle_s: expected seconds, 0 or more {where}, got {settle!r}")
    window = kwargs.get("window_s", 3600)
    if not 60 <= window <= 86400 or 86400 % window:
        raise ConfigError(
            f"{at}.window_s: expected seconds that divide a day, 60 to 86400 (e.g. 600, 3600) "
            f"{where}, got {window!r}"
        )
    urls = [("url", kwargs["url"])] if "url" in kwargs else []
    urls += [(f"urls[{i}]", url) for i, url in enumerate(kwargs.get("urls", ()))]
    for key, url in urls:  # (an ftp:// or bare-word exporter URL failed every round)
        if not str(url).startswith(("http://", "https://")):
            shown = redact_url(str(url))
            raise ConfigError(f"{at}.{key}: expected an http(s):// URL {where}, got {shown!r}")
    for entry in kwargs.get("namespace_accounts", ()):
        namespace, sep, account = (p.strip() for p in str(entry).partition("="))
        if not sep or not valid_name(namespace) or not valid_name(account):
            raise ConfigError(
                f'{at}.namespace_accounts: expected "<namespace>=<account>" entries, each one '
                f'plain name (e.g. "ml-team=physics") {where}, got {entry!r}'
            )
    if kind == "prometheus":
        _check_prometheus(kwargs, at, where)
    if kind == "dcgm-exporter" and not kwargs["urls"]:
        raise ConfigError(f"{at}.urls: give at least one exporter URL {where}")
    source: Source = cls(**kwargs)
    return source


def _check_prometheus(kwargs: dict[str, Any], at: str, where: str) -> None:
    """`columns` and `protocol` of a prometheus source, as `collect prometheus` takes them."""
    from collector.errors import ConfigError as BadColumns
    from collector.sources.prometheus.columns import parse_columns
    from collector.sources.prometheus.pull import PROTOCOLS

    try:
        parse_columns(str(kwargs.get("columns", "read")))
    except BadColumns as exc:
        raise ConfigError(f"{at}.columns: {exc} {where}") from None
    if kwargs.get("protocol", "auto") not in PROTOCOLS:
        raise ConfigError(
            f"{at}.protocol: expected one of {', '.join(PROTOCOLS)} {where}, "
            f"got {kwargs.get('protocol')!r}"
        )


def parse_sources(items: list[Any], where: str) -> tuple[Source, ...]:
    """Validate `[[sources]]`; errors name the entry and key, e.g. `sources[1].url`, and never
    a URL's `user:password@` (a URL given where a table or a string belongs was printed whole)."""
    try:
        parsed = tuple(_source(i, item, where) for i, item in enumerate(items))
    except ConfigError as exc:
        raise ConfigError(redact_urls(str(exc))) from None
    names = [s.name for s in parsed]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(
                f"sources: two sources named {name!r} {where}; one per kind and cluster"
            )
    return parsed


register_list_section("sources", parse_sources)
