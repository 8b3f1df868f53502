"""Decide what to say about which finding now: hygiene and escalation, as pure functions.

Given the findings, what was already said (the ledger's history), the configuration and the
time, `plan` returns the notices to send, the actions to take and what waits. It sends nothing.

Rules (Job Defense Shield's hygiene, see shared/reference/anchors.md §2):
- one notice per subject per detector per `period_hours`; a finding that changes within the
  period waits, unless its severity rose;
- idle jobs escalate while the idleness is current (the finding's end_ts is null, or within
  `idle_fresh_minutes` with no busy time observed after it): first, second and final notice
  at `idle_after` / `second_notice` / `final_notice` minutes of the latest idle episode (a job
  idle, busy, then idle again starts over, with notices of its own), then the action (off by
  default) at `action_after`,
  never before the final notice has been delivered for (action_after - final_notice) minutes,
  and only on a cluster `action_clusters` maps to a scheduler endpoint, for a job id of the
  scheduler's format (else the final notice is the last word, and `waiting` says why);
- interactive jobs get `interactive_factor` × those minutes and are never cancelled;
- non-critical notices wait out quiet hours, weekends and holidays (escalation of a job that
  will be cancelled does not: its owner must hear before the action);
- test mode plans as usual but every notice goes to the admins only, and no action runs.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from app.alerts.actions import job_id_problem, planned_argv
from app.alerts.findings import SEVERITY_RANK, FindingContext
from app.alerts.settings import WEEKDAYS, AlertsConfig

__all__ = [
    "Action",
    "History",
    "Notice",
    "Plan",
    "Prior",
    "Stage",
    "action_argv",
    "idle_stage",
    "is_quiet_time",
    "plan",
    "why_no_action",
]


class Stage(IntEnum):
    """How far a finding has escalated. Non-idle findings only ever get NOTICE."""

    NONE = 0
    NOTICE = 1  # also an idle job's first notice
    SECOND = 2
    FINAL = 3
    ACTION = 4


@dataclass(frozen=True, slots=True)
class Prior:
    """What was said about a finding: the highest stage, and the latest notice's content."""

    stage: Stage
    fingerprint: str
    severity: str
    created_ts: dt.datetime


class History(Protocol):
    """What the ledger knows about earlier notices (in the same mode: test or real)."""

    def last_notice(
        self, cluster: str, finding_id: str, test_mode: bool, since: dt.datetime | None = None
    ) -> Prior | None:
        """The latest notice about this finding, its stage the highest, of the notices about
        it as it was at or after `since` (the data's time: the finding's end each recorded;
        any: None; an earlier idle episode's escalation is not this one's): None where none
        was."""
        ...

    def last_subject_notice(
        self, subject_key: str, detector: str, test_mode: bool
    ) -> dt.datetime | None:
        """When the latest notice about this subject from this detector was planned."""
        ...

    def final_delivered_at(
        self, cluster: str, finding_id: str, since: dt.datetime | None = None
    ) -> dt.datetime | None:
        """When the final notice to the job's owner was delivered (real mode only), of the
        final notices about the finding as it was at or after `since` (as `last_notice`)."""
        ...

    def action_taken(self, cluster: str, job_id: str) -> bool:
        """Whether the action already ran (or was attempted) for this job."""
        ...

    def action_exit(self, cluster: str, job_id: str) -> int | None:
        """The exit status of the job's action; None when it never finished."""
        ...


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing to tell people about one finding."""

    finding: FindingContext
    stage: Stage
    escalating: bool  # part of an idle job's escalation
    test_mode: bool
    action_at: dt.datetime | None = None  # when the action will run (final notice only)


@dataclass(frozen=True, slots=True)
class Action:
    """Cancel an idle job on its own cluster: the scheduler endpoint the configuration maps the
    finding's cluster to, and the argument list planned (never a shell string). The runner
    re-reads the job there first and runs the command that re-read confirms."""

    finding: FindingContext
    endpoint: str
    argv: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of one planning pass."""

    notices: list[Notice]
    actions: list[Action]
    waiting: list[tuple[FindingContext, str]]  # (finding, why it waits)


def _episode_start(f: FindingContext) -> dt.datetime:
    """Where the idleness being escalated began: the latest idle episode's start (a job idle,
    busy, then idle again is escalated from its second start, not its first), never before the
    job started: episodes start on a bucket's boundary, and a job started 23:00:59 was "idle
    for an hour" at 23:59:18 (each stage, and the cancel, up to a bucket early)."""
    start = f.episode_start or f.job_start_ts or f.detected_ts
    return max(start, f.job_start_ts) if f.job_start_ts is not None else start


def _minutes(f: FindingContext, now: dt.datetime) -> float:
    """Minutes of the latest idle episode (up to its end_ts when the detector set one)."""
    end = min(f.end_ts, now) if f.end_ts is not None else now
    return (end - _episode_start(f)).total_seconds() / 60.0


def _current(f: FindingContext, cfg: AlertsConfig, now: dt.datetime) -> bool:
    """The idleness is still going on: open-ended, or seen within idle_fresh_minutes with no
    busy time observed after it (a job that went back to work a few minutes ago is not)."""
    if f.end_ts is None:
        return True
    return f.goes_on and now - f.end_ts <= dt.timedelta(minutes=cfg.idle_fresh_minutes)


def _factor(f: FindingContext, cfg: AlertsConfig) -> float:
    return cfg.interactive_factor if f.interactive else 1.0


def idle_stage(f: FindingContext, cfg: AlertsConfig, now: dt.datetime) -> Stage:
    """The escalation stage an idle finding has reached by `now` (from the finding's start)."""
    minutes = _minutes(f, now) / _factor(f, cfg)
    for stage, threshold in (
        (Stage.ACTION, cfg.action_after_minutes),
        (Stage.FINAL, cfg.final_notice_minutes),
        (Stage.SECOND, cfg.second_notice_minutes),
        (Stage.NOTICE, cfg.idle_after_minutes),
    ):
        if minutes >= threshold:
            return stage
    return Stage.NONE


def is_quiet_time(cfg: AlertsConfig, now: dt.datetime) -> str | None:
    """Why non-critical alerts must wait now (quiet hours, weekend, holiday), or None."""
    local = now.astimezone(zoneinfo.ZoneInfo(cfg.timezone))
    if local.date().isoformat() in cfg.holidays:
        return f"holiday {local.date().isoformat()}"
    if WEEKDAYS[local.weekday()] not in cfg.workdays:
        return f"not a workday ({WEEKDAYS[local.weekday()]})"
    quiet = cfg.quiet
    if quiet is not None and quiet.contains(local.time()):
        return f"quiet hours {cfg.quiet_hours} {cfg.timezone}"
    return None


def why_no_action(f: FindingContext, cfg: AlertsConfig) -> str | None:
    """Why the action may never touch this finding's job, or None when it may (once the
    scheduler confirms the job at the time): its cluster has no endpoint, its id is no job id
    of the scheduler's format, or the lake lacks what the re-read compares (Slurm: user and
    submit time; Kubernetes: the pod's UID)."""
    endpoint = cfg.endpoint(f.cluster)
    if endpoint is None:
        return (
            f"no action: cluster {f.cluster!r} has no scheduler endpoint in "
            "alerts.action_clusters, so nothing on it is ever cancelled"
        )
    problem = job_id_problem(cfg.action, f.job_id)
    if problem is not None:
        return f"no action: {problem}"
    # what the re-read compares with the scheduler's answer
    if cfg.action == "scancel" and (not f.user or f.job_submit_ts is None):
        return f"no action: the lake has no user or submit time of job {f.job_id} to check"
    if cfg.action != "scancel" and not f.job_id_raw:
        return f"no action: the lake has no UID of pod {f.job_id} to check"
    return None


def action_argv(f: FindingContext, cfg: AlertsConfig) -> tuple[str, ...]:
    """The command the plan expects to cancel the finding's job with, on its own cluster:
    `scancel --clusters=<endpoint> … -- JOBID`, or for a pod `kubectl --context=<endpoint> …`
    (the runner re-reads the job first and, for a pod with an owner, acts on the owner)."""
    endpoint = cfg.endpoint(f.cluster)
    if endpoint is None:
        raise ValueError(f"cluster {f.cluster!r} has no endpoint in alerts.action_clusters")
    return planned_argv(f, cfg, endpoint)


def _plan_one(
    f: FindingContext, history: History, cfg: AlertsConfig, now: dt.datetime, quiet: str | None
) -> tuple[Notice | None, Action | None, str | None]:
    test = cfg.test_mode
    # a job that was idle and is busy again (the finding's span ended) is not escalated
    escalating = f.detector in cfg.idle_detectors and f.job_running and _current(f, cfg, now)
    critical = f.severity == "critical"
    # an escalation is of the latest idle episode: what was said of an earlier one (the job
    # went back to work since) is not this one's first, second or final notice
    episode = _episode_start(f) if escalating else None
    prior = history.last_notice(f.cluster, f.finding_id, test, since=episode)
    if escalating:
        stage = idle_stage(f, cfg, now)
        if stage == Stage.NONE:
            return None, None, "idle, but not yet for idle_after_minutes"
        blocked = why_no_action(f, cfg) if cfg.action_enabled and not f.interactive else None
        may_act = cfg.action_enabled and not f.interactive and blocked is None
        if stage == Stage.ACTION and may_act and not test and f.job_id:
            delivered = history.final_delivered_at(f.cluster, f.finding_id, since=episode)
            grace = dt.timedelta(minutes=cfg.action_after_minutes - cfg.final_notice_minutes)
            if delivered is None:
                stage = Stage.FINAL  # the owner must have had the final notice first
            elif now - delivered < grace:
                return None, None, "final notice delivered; waiting out its grace period"
            elif not history.action_taken(f.cluster, f.job_id):
                # the runner sends the ACTION notice once it knows how the action went
                return None, Action(f, cfg.endpoint(f.cluster) or "", action_argv(f, cfg)), None
            elif (code := history.action_exit(f.cluster, f.job_id)) != 0:
                # it failed, or never finished (killed mid-way): the job was not cancelled, so
                # no "Job cancelled"; the action is not tried again (`alert --status` shows it)
                ran = "did not finish" if code is None else f"exited {code}"
                return None, None, f"the action ran once and {ran}; it is not retried"
            # else: it succeeded, and its ACTION notice (lost if the run died before queueing
            # it) is planned below unless it was recorded already
        elif stage == Stage.ACTION:
            stage = Stage.FINAL  # no action: the final notice is the last word
        why = blocked if stage == Stage.FINAL else None  # the ledger's report says why not
        if prior is not None and prior.stage >= stage:
            return None, None, why  # said already
        if quiet and not critical and not (may_act and stage >= Stage.SECOND):
            return None, None, quiet
        action_at = None
        if stage == Stage.FINAL and may_act:
            # the action runs when the job has been idle action_after minutes AND the final
            # notice (delivered now at the earliest) has had its grace period
            start = _episode_start(f)
            delay = dt.timedelta(minutes=cfg.action_after_minutes * _factor(f, cfg))
            grace = dt.timedelta(minutes=cfg.action_after_minutes - cfg.final_notice_minutes)
            action_at = max(start + delay, now + grace)
        return Notice(f, stage, True, test, action_at), None, why
    if prior is not None:
        if prior.fingerprint == f.fingerprint:
            return None, None, None
        rose = SEVERITY_RANK.get(f.severity, 0) > SEVERITY_RANK.get(prior.severity, 0)
        last = history.last_subject_notice(f.subject_key, f.detector, test)
        if not rose and last is not None and now - last < dt.timedelta(hours=cfg.period_hours):
            return None, None, f"changed, but notified less than {cfg.period_hours:g} h ago"
    else:
        last = history.last_subject_notice(f.subject_key, f.detector, test)
        if last is not None and now - last < dt.timedelta(hours=cfg.period_hours) and not critical:
            return None, None, f"subject notified less than {cfg.period_hours:g} h ago"
    if quiet and not critical:
        return None, None, quiet
    return Notice(f, Stage.NOTICE, False, test), None, None


def plan(
    findings: list[FindingContext], history: History, cfg: AlertsConfig, now: dt.datetime
) -> Plan:
    """Decide the notices and actions due at `now` (see the module docstring for the rules)."""
    quiet = is_quiet_time(cfg, now)
    floor = SEVERITY_RANK[cfg.min_severity]
    notices, actions, waiting = [], [], []
    seen_subjects: set[tuple[str, str]] = set()
    for f in findings:
        if SEVERITY_RANK.get(f.severity, 0) < floor:
            continue
        notice, action, why = _plan_one(f, history, cfg, now, quiet)
        if notice is not None and not notice.escalating:
            # one notice per subject per detector per run (two findings, one subject)
            slot = (f.subject_key, f.detector)
            if slot in seen_subjects and f.severity != "critical":
                why, notice = "another finding about this subject is being sent now", None
            seen_subjects.add(slot)
        if notice is not None:
            notices.append(notice)
        if action is not None:
            actions.append(action)
        if why is not None:
            waiting.append((f, why))
    return Plan(notices, actions, waiting)
