"""The `[alerts]` configuration section (DESIGN §7): delivery, routing, hygiene and escalation.

Key names of DESIGN §7 are fixed; the rest (quiet hours, workdays, escalation, retries, action)
are this module's. Every key can be set as `GPULEDGER_ALERTS_<KEY>`.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.config import (
    Secret,
    non_negative_at_most_a_year,
    positive_at_most_a_year,
    register_section,
    setting,
)

__all__ = [
    "ACTIONS",
    "SEVERITIES",
    "SMTP_TLS",
    "WEEKDAYS",
    "AlertsConfig",
    "QuietHours",
    "split_endpoint",
]

SEVERITIES = ("info", "warn", "critical")
ACTIONS = ("scancel", "pod-delete")
SMTP_TLS = ("auto", "none", "starttls", "implicit")
SMTPS_PORT = 465  # SMTP over implicit TLS (RFC 8314 submissions)
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# a day as written in the configuration (short or full name, any case) -> its WEEKDAYS name
_DAY_NAMES = {
    name: short for short, full in zip(WEEKDAYS, _FULL_DAYS, strict=True) for name in (short, full)
}
_QUIET = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")
SLACK_API_URL = "https://slack.com/api/"


def _port(v: int) -> str | None:
    return None if 1 <= v <= 65535 else "expected a port number 1-65535"


def _ascii(v: str) -> str | None:
    # (Python's SMTP client sends AUTH in ASCII: another character failed every run)
    return None if v.isascii() else "expected ASCII characters only (SMTP AUTH sends ASCII)"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "expected a number of at least 0"


# An address a header can carry: no space, newline, comma or angle bracket (`a\nBcc: x@y` in
# --email-to was a traceback once the reports were written; in email_from a header of its own)
_ADDRESS = re.compile(r"[^@\s,;<>\"'()]+@[^@\s,;<>\"'()]+")


def address_problem(addresses: Iterable[str]) -> str | None:
    """Why `addresses` are not all plain email addresses (name@host), or None."""
    bad = [a for a in addresses if not _ADDRESS.fullmatch(a)]
    return f"not an email address: {', '.join(map(repr, bad))}" if bad else None


def _address(v: str) -> str | None:
    return address_problem([v])


def _addresses(v: tuple[str, ...]) -> str | None:
    return address_problem(v)


def _severity(v: str) -> str | None:
    return None if v in SEVERITIES else f"expected one of {', '.join(SEVERITIES)}"


def _smtp_tls(v: str) -> str | None:
    return None if v in SMTP_TLS else f"expected one of {', '.join(SMTP_TLS)}"


def _action(v: str) -> str | None:
    return None if v in ACTIONS else f"expected one of {', '.join(ACTIONS)}"


# a Slurm cluster name or a kubeconfig context as it may follow `--clusters=` / `--context=`
_ENDPOINT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:/-]*")


def split_endpoint(entry: str) -> tuple[str, str]:
    """`della=della-slurm` → ("della", "della-slurm"); a bare `della` maps to itself."""
    cluster, sep, endpoint = entry.partition("=")
    cluster = cluster.strip()
    return cluster, (endpoint.strip() if sep else cluster)


def _endpoints(v: tuple[str, ...]) -> str | None:
    seen: set[str] = set()
    for entry in v:
        cluster, endpoint = split_endpoint(entry)
        if not cluster or not _ENDPOINT.fullmatch(endpoint):
            return (
                "expected `<lake cluster>=<Slurm cluster or kube context>` entries (letters, "
                f"digits, . _ @ : / -, not starting with -), {entry!r} is not one"
            )
        if cluster in seen:
            return f"cluster {cluster!r} is listed twice"
        seen.add(cluster)
    return None


def _detectors(v: tuple[str, ...]) -> str | None:
    """Names a detector writes: a rule's, the bottleneck diagnosis, or a model's."""
    from detectors import names

    known = {*names.RULES, names.BOTTLENECK}
    known |= {names.FAILING_GPU, names.RUNTIME_QUANTILES, names.LEMON_NODE}
    early = re.compile(rf"{re.escape(names.EARLY_WASTE)}_\d+m")
    bad = [d for d in v if d not in known and not early.fullmatch(d)]
    if bad:
        return f"no detector named {', '.join(map(repr, bad))}; known: {', '.join(sorted(known))}"
    return None


def _quiet(v: str) -> str | None:
    return None if v == "" or _QUIET.match(v) else "expected HH:MM-HH:MM (e.g. 20:00-08:00) or ''"


def weekday(name: str) -> str | None:
    """`name` (mon or monday, any case) as its WEEKDAYS name; None when it is no weekday."""
    return _DAY_NAMES.get(name.strip().lower())


def _weekdays(v: tuple[str, ...]) -> str | None:
    bad = [d for d in v if weekday(d) is None]
    if not bad:
        return None
    return (
        f"expected weekday names ({', '.join(WEEKDAYS)} or monday … sunday, any case), "
        f"{bad[0]!r} is not one"
    )


def _dates(v: tuple[str, ...]) -> str | None:
    for d in v:
        try:
            dt.date.fromisoformat(d)
        except ValueError:
            return f"expected ISO dates (YYYY-MM-DD), {d!r} is not one"
    return None


def _timezone(v: str) -> str | None:
    try:
        zoneinfo.ZoneInfo(v)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return "expected an IANA time zone name (e.g. UTC, Europe/Berlin)"
    return None


def _url(v: str) -> str | None:
    return None if v.startswith(("http://", "https://")) else "expected an http(s) URL"


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily window [start, end) in local time; it may wrap past midnight (20:00-08:00)."""

    start: dt.time
    end: dt.time

    def contains(self, t: dt.time) -> bool:
        """Whether the local wall-clock time `t` falls in the window."""
        if self.start <= self.end:
            return self.start <= t < self.end
        return t >= self.start or t < self.end


@register_section("alerts")
@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """Slack and email delivery of findings, with routing, hygiene and escalation."""

    # delivery: SMTP
    smtp_host: str = setting("localhost", "SMTP server for email.")
    smtp_port: int = setting(25, "SMTP port (587 for STARTTLS submission).", _port)
    smtp_user: str | None = setting(None, "SMTP login; none means no AUTH.", _ascii)
    smtp_password: Secret | None = setting(
        None, "SMTP password (env or smtp_password_file only).", _ascii, secret=True
    )
    smtp_starttls: bool = setting(False, "Upgrade the SMTP connection with STARTTLS.")
    smtp_tls: str = setting(
        "auto",
        "SMTP encryption: none, starttls, implicit (SMTPS) or auto "
        "(implicit on port 465, starttls when smtp_starttls, else none).",
        _smtp_tls,
    )
    smtp_allow_plaintext_auth: bool = setting(
        False, "Allow sending the SMTP password without TLS (a trusted local relay only)."
    )
    smtp_ca_file: Path | None = setting(
        None, "CA bundle to verify the SMTP server's certificate (default: the system's)."
    )
    smtp_timeout_s: float = setting(
        30.0, "Seconds before an SMTP connection attempt fails.", positive_at_most_a_year
    )
    email_from: str = setting("gpuledger@localhost", "Sender address of every email.", _address)
    email_reply_to: str | None = setting(
        None, "Reply-To of every email (e.g. the help desk; keeps auto-replies off email_from)."
    )
    email_domain: str = setting(
        "localhost", "A user with no directory entry is mailed at <user>@<email_domain>."
    )
    admin_emails: tuple[str, ...] = setting(
        (), "Admins: digests, hardware alerts, test mode.", _addresses
    )
    # delivery: Slack
    slack_token: Secret | None = setting(
        None, "Slack bot token for chat.postMessage (env or slack_token_file only).", secret=True
    )
    slack_api_url: str = setting(SLACK_API_URL, "Slack Web API base URL.", _url)
    slack_webhook_url: Secret | None = setting(
        None, "Incoming webhook for channel digests (a credential: env or file).", _url, secret=True
    )
    # routing
    directory: Path | None = setting(
        None, "TOML or CSV file: users -> email, Slack ID, opt-out; accounts -> managers."
    )
    # what to alert on
    lookback_hours: float = setting(
        168.0,
        "Only findings (re)detected within this many hours are considered (counted back from "
        "the clock, or from a cluster's data end where its data stop earlier: a model stamps "
        "its findings in the data's time).",
        positive_at_most_a_year,
    )
    min_severity: str = setting("warn", "Findings below this severity are not sent.", _severity)
    idle_detectors: tuple[str, ...] = setting(
        ("idle_job",), "Detectors whose findings are idle jobs (escalated).", _detectors
    )
    # escalation of idle jobs (minutes of full idleness, from the finding's start)
    idle_after_minutes: float = setting(
        60.0, "Minutes of a fully idle job before its first notice.", non_negative_at_most_a_year
    )
    idle_fresh_minutes: float = setting(
        30.0,
        "An idle finding is current if its end_ts is null or this recent.",
        non_negative_at_most_a_year,
    )
    second_notice_minutes: float = setting(
        105.0, "Minutes idle before the second notice.", non_negative_at_most_a_year
    )
    final_notice_minutes: float = setting(
        120.0, "Minutes idle before the final notice.", non_negative_at_most_a_year
    )
    action_after_minutes: float = setting(
        150.0,
        "Minutes idle before the action (only when action_enabled).",
        non_negative_at_most_a_year,
    )
    action_enabled: bool = setting(False, "Cancel idle jobs after the final notice.")
    action: str = setting(
        "scancel",
        "What cancels: scancel (Slurm) or pod-delete (Kubernetes: suspends the pod's Job or "
        "deactivates its Kueue Workload; only an ownerless pod is deleted).",
        _action,
    )
    action_clusters: tuple[str, ...] = setting(
        (),
        "The only clusters the action may touch, each `<lake cluster>=<endpoint>`: the Slurm "
        "cluster name for `scancel --clusters=` (scancel) or the kubeconfig context "
        "(pod-delete); a bare name means the same name. Others are alerted, never acted on.",
        _endpoints,
    )
    scancel_command: str = setting("scancel", "The scancel program (path or name).")
    squeue_command: str = setting(
        "squeue", "The squeue program that re-reads a job before it is cancelled."
    )
    kubectl_command: str = setting("kubectl", "The kubectl program for pod-delete.")
    interactive_factor: float = setting(
        2.0, "Interactive jobs: escalation minutes are multiplied by this.", positive_at_most_a_year
    )
    # hygiene
    period_hours: float = setting(
        24.0, "At most one alert per subject per rule per this many hours.", positive_at_most_a_year
    )
    quiet_hours: str = setting(
        "20:00-08:00", "No non-critical alerts in this local window ('' for none).", _quiet
    )
    workdays: tuple[str, ...] = setting(
        ("mon", "tue", "wed", "thu", "fri"),
        "Days non-critical alerts go out (mon or monday, any case).",
        _weekdays,
    )
    holidays: tuple[str, ...] = setting((), "Dates (YYYY-MM-DD) that are not workdays.", _dates)
    timezone: str = setting(
        "UTC", "Time zone of quiet hours, workdays and the times notices give.", _timezone
    )
    opt_out: tuple[str, ...] = setting((), "Users who get no non-critical alerts.")
    max_messages_per_day: int = setting(
        3,
        "Most alert messages one person gets per channel per local day (0: no cap); critical "
        "findings and final notices still go out.",
        _non_negative,
    )
    templates_dir: Path | None = setting(
        None,
        "Folder of Jinja2 templates overriding the shipped ones by name (e.g. person.html.j2).",
    )
    test_mode: bool = setting(False, "Send everything to the admins only; take no action.")
    digest_every_minutes: float = setting(
        60.0,
        "At most one admin digest per this many minutes (0: every run).",
        non_negative_at_most_a_year,
    )
    # delivery behaviour
    max_attempts: int = setting(5, "Tries per message in one run before it waits for the next.")
    retry_base_s: float = setting(
        1.0, "First retry delay; doubles each try.", non_negative_at_most_a_year
    )
    retry_max_s: float = setting(
        60.0, "Longest retry delay (and Retry-After honoured).", non_negative_at_most_a_year
    )
    retry_later_s: float = setting(
        300.0,
        "After a run gives up on a message, wait this long for the next try; doubles, to 24 h.",
        non_negative_at_most_a_year,
    )
    give_up_after_runs: int = setting(
        8, "Runs that may give up on a message before it is marked failed."
    )
    follow_interval_s: float = setting(
        60.0, "Seconds between polls with --follow.", positive_at_most_a_year
    )

    def __post_init__(self) -> None:
        # workdays as the short lower-case names plan.py compares with ("Monday" -> "mon");
        # a name that is no weekday stays as written, for the check to name it
        days = tuple(weekday(d) or d for d in self.workdays)
        object.__setattr__(self, "workdays", days)

    def endpoint(self, cluster: str) -> str | None:
        """The scheduler endpoint the action uses for `cluster`, or None: never act there."""
        for entry in self.action_clusters:
            name, endpoint = split_endpoint(entry)
            if name == cluster:
                return endpoint
        return None

    def validate(self) -> str | None:
        """Cross-key checks; returns `key: problem` or None."""
        stages = (
            self.idle_after_minutes,
            self.second_notice_minutes,
            self.final_notice_minutes,
            self.action_after_minutes,
        )
        if list(stages) != sorted(stages):
            return (
                "second_notice_minutes: escalation must not go backwards: expected "
                "idle_after <= second_notice <= final_notice <= action_after minutes, got "
                + " / ".join(f"{s:g}" for s in stages)
            )
        if self.smtp_password is not None and not self.smtp_user:
            return "smtp_user: an SMTP password is set but no user to log in with"
        if self.smtp_starttls and self.smtp_tls in ("none", "implicit"):
            return (
                f"smtp_tls: {self.smtp_tls!r} contradicts smtp_starttls = true; "
                "set one of them only"
            )
        if (
            self.smtp_user
            and self.smtp_password is not None
            and self.smtp_encryption == "none"
            and not self.smtp_allow_plaintext_auth
        ):
            return (
                "smtp_tls: the SMTP password would travel unencrypted; set smtp_starttls = "
                'true (port 587), smtp_tls = "implicit" (port 465), or, for a trusted local '
                "relay only, smtp_allow_plaintext_auth = true"
            )
        if self.max_attempts < 1:
            return f"max_attempts: expected at least 1, got {self.max_attempts}"
        if self.give_up_after_runs < 1:
            return f"give_up_after_runs: expected at least 1, got {self.give_up_after_runs}"
        return None

    @property
    def smtp_encryption(self) -> str:
        """How the SMTP connection is encrypted: none, starttls or implicit (smtp_tls resolved)."""
        if self.smtp_tls != "auto":
            return self.smtp_tls
        if self.smtp_starttls:
            return "starttls"
        return "implicit" if self.smtp_port == SMTPS_PORT else "none"

    @property
    def quiet(self) -> QuietHours | None:
        """The parsed quiet-hours window, or None."""
        match = _QUIET.match(self.quiet_hours)
        if not match:
            return None
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        return QuietHours(dt.time(h1, m1), dt.time(h2, m2))
