"""Hygiene and escalation rules of the planner, against the real (in-memory) ledger."""

from __future__ import annotations

import dataclasses
import datetime as dt
from unittest.mock import ANY

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.alerts.compose import compose_notice
from app.alerts.directory import load_directory
from app.alerts.findings import FindingContext
from app.alerts.ledger import Ledger
from app.alerts.plan import Notice, Stage, idle_stage, is_quiet_time, plan
from app.alerts.settings import AlertsConfig
from app.config import load_config
from tests.infra.examples import examples

from .factories import DIRECTORY_TOML, MIN, NOW

START = NOW - 130 * MIN


def cfg(**env: str) -> AlertsConfig:
    environ = {f"GPULEDGER_ALERTS_{k.upper()}": v for k, v in env.items()}
    return load_config(None, environ=environ).section(AlertsConfig)


def idle(minutes_ago: float = 130, **over) -> FindingContext:
    base = FindingContext(
        cluster="della",
        finding_id="f-idle",
        detector="idle_job",
        severity="warn",
        subject_kind="job",
        subject_id="4242",
        detected_ts=NOW,
        job_id="4242",
        user="alice",
        account="physics",
        start_ts=NOW - minutes_ago * MIN,
        job_submit_ts=NOW - (minutes_ago + 5) * MIN,
        job_state="RUNNING",
        gpu_h_at_stake=8.0,
    )
    return dataclasses.replace(base, **over)


def empty_ledger(tmp_path) -> Ledger:
    return Ledger.snapshot(tmp_path / "no-ledger.sqlite")


def record(ledger: Ledger, notice: Notice, now: dt.datetime, delivered: bool = True) -> None:
    """What the runner does with a planned notice: record it, its owner message, delivery."""
    f = notice.finding
    nid = ledger.add_notice(
        cluster=f.cluster,
        finding_id=f.finding_id,
        subject_key=f.subject_key,
        detector=f.detector,
        stage=int(notice.stage),
        fingerprint=f.fingerprint,
        severity=f.severity,
        test_mode=notice.test_mode,
        now=now,
    )
    key = f"{f.finding_id}-{int(notice.stage)}-{now.isoformat()}"
    ledger.add_message(
        key=key,
        notice_id=nid,
        kind="notice",
        role="owner",
        channel="email",
        recipient="alice@x",
        payload={},
        now=now,
    )
    if delivered:
        ledger.mark_delivered(key, now)


@pytest.mark.parametrize(
    ("now", "why"),
    [
        (NOW, None),  # Wednesday 10:00 UTC
        (NOW.replace(hour=21), "quiet hours 20:00-08:00 UTC"),
        (NOW.replace(hour=7, minute=59), "quiet hours 20:00-08:00 UTC"),
        (NOW.replace(hour=8), None),
        (NOW + dt.timedelta(days=3), "not a workday (sat)"),
    ],
)
def test_quiet_hours_and_workdays(now, why):
    assert is_quiet_time(cfg(), now) == why


def test_capitalised_workdays_hold_back_alerts_on_the_other_days():
    # NOW is a Wednesday; "Saturday" and "SUN" are the only workdays
    weekend = cfg(workdays="Saturday,SUN")
    assert is_quiet_time(weekend, NOW) == "not a workday (wed)"
    assert is_quiet_time(weekend, NOW + dt.timedelta(days=3)) is None


def test_holidays_and_time_zones():
    assert is_quiet_time(cfg(holidays="2026-11-04"), NOW) == "holiday 2026-11-04"
    # 10:00 UTC is 19:00 in Tokyo: outside 20:00-08:00 there, inside 18:00-08:00
    assert is_quiet_time(cfg(timezone="Asia/Tokyo"), NOW) is None
    assert is_quiet_time(cfg(timezone="Asia/Tokyo", quiet_hours="18:00-08:00"), NOW) is not None


def test_quiet_time_holds_back_non_critical_only(tmp_path):
    late = NOW.replace(hour=22)
    over = idle(finding_id="f-over", detector="overallocated", job_state="COMPLETED")
    hw = idle(finding_id="f-xid", detector="xid", severity="critical", subject_kind="gpu")
    decided = plan([over, hw], empty_ledger(tmp_path), cfg(), late)
    assert [n.finding.finding_id for n in decided.notices] == ["f-xid"]
    assert decided.waiting == [(over, "quiet hours 20:00-08:00 UTC")]


@pytest.mark.parametrize(
    ("minutes", "interactive", "expected"),
    [
        (59, False, Stage.NONE),
        (60, False, Stage.NOTICE),
        (104, False, Stage.NOTICE),
        (105, False, Stage.SECOND),
        (120, False, Stage.FINAL),
        (150, False, Stage.ACTION),
        (119, True, Stage.NONE),  # interactive: twice the minutes
        (120, True, Stage.NOTICE),
        (240, True, Stage.FINAL),
    ],
)
def test_idle_escalation_stages(minutes, interactive, expected):
    assert idle_stage(idle(minutes, interactive=interactive), cfg(), NOW) == expected


def test_idleness_is_measured_from_the_jobs_start_not_its_first_bucket():
    # The probe: job 1083 started 23:00:59, its idle episode at the bucket's 23:00:00; at
    # 23:59:18 (59.3 minutes in) it got its first notice, and each stage came up to a bucket
    # early (the cancel too)
    early = idle(61, job_start_ts=NOW - 59.3 * MIN)  # its span from the bucket, 61 min ago
    assert idle_stage(early, cfg(), NOW) == Stage.NONE
    assert idle_stage(dataclasses.replace(early, job_start_ts=NOW - 60 * MIN), cfg(), NOW) == (
        Stage.NOTICE
    )
    # a later episode (idle again after working) still counts from its own start
    episode = {"episode_start_e": (NOW - 70 * MIN).timestamp()}
    again = idle(200, job_start_ts=NOW - 200 * MIN, evidence=episode)
    assert idle_stage(again, cfg(), NOW) == Stage.NOTICE


def test_escalation_sends_each_stage_once_and_no_action_by_default(tmp_path):
    ledger, config, sent = empty_ledger(tmp_path), cfg(), []
    for minutes in (30, 60, 70, 105, 110, 120, 150, 300):
        now = START + minutes * MIN
        decided = plan([idle(detected_ts=now)], ledger, config, now)
        assert decided.actions == []
        for n in decided.notices:
            sent.append((minutes, n.stage))
            record(ledger, n, now)
    assert sent == [(60, Stage.NOTICE), (105, Stage.SECOND), (120, Stage.FINAL)]


SCANCEL = ("scancel", "--clusters=della", "--user=alice", "--state=RUNNING", "--", "4242")


def test_the_action_waits_for_a_delivered_final_notice_and_its_grace(tmp_path):
    ledger, config = empty_ledger(tmp_path), cfg(action_enabled="true", action_clusters="della")
    # the alerter starts late: the job is past action_after but nobody was told yet
    now = START + 200 * MIN
    first = plan([idle()], ledger, config, now)
    assert [n.stage for n in first.notices] == [Stage.FINAL] and first.actions == []
    # cancelled as soon as the final notice's grace allows
    assert first.notices[0].action_at == now + 30 * MIN
    record(ledger, first.notices[0], now, delivered=False)
    # not delivered yet (SMTP down): still no action
    assert plan([idle()], ledger, config, now + 29 * MIN).actions == []
    key = ledger.due(now + 60 * MIN)[0].key
    ledger.mark_delivered(key, now + 30 * MIN)
    waiting = plan([idle()], ledger, config, now + 59 * MIN)
    assert waiting.actions == [] and "grace" in waiting.waiting[0][1]
    due = plan([idle()], ledger, config, now + 60 * MIN)
    assert [(a.endpoint, a.argv) for a in due.actions] == [("della", SCANCEL)]


def test_interactive_jobs_and_test_mode_are_never_acted_on(tmp_path):
    for finding, config in (
        (idle(1000, interactive=True), cfg(action_enabled="true")),
        (idle(1000), cfg(action_enabled="true", test_mode="true")),
    ):
        ledger = empty_ledger(tmp_path)
        for step in range(3):
            now = NOW + step * 60 * MIN
            decided = plan([finding], ledger, config, now)
            assert decided.actions == []
            for n in decided.notices:
                record(ledger, n, now)


def test_pod_delete_names_its_context_namespace_and_pod_after_the_options():
    config = cfg(action_enabled="true", action="pod-delete", action_clusters="k8s=prod-ctx")
    from app.alerts.plan import action_argv

    argv = action_argv(idle(cluster="k8s", job_id="team-a/trainer-0"), config)
    assert argv == (
        "kubectl",
        "--context=prod-ctx",
        "--namespace=team-a",
        "delete",
        "pod",
        "--wait=false",
        "--",
        "trainer-0",
    )


def _final_then_due(tmp_path, finding, config):
    """Plan a finding whose final notice was delivered long ago, at a time the action is due."""
    ledger = empty_ledger(tmp_path)
    now = START + 200 * MIN
    first = plan([finding], ledger, config, now)
    assert [n.stage for n in first.notices] == [Stage.FINAL]
    record(ledger, first.notices[0], now)
    return first, plan([finding], ledger, config, now + 60 * MIN)


@pytest.mark.parametrize(
    ("clusters", "finding", "why"),
    [
        ("", idle(), "cluster 'della' has no scheduler endpoint"),
        ("other=della", idle(), "cluster 'della' has no scheduler endpoint"),
        ("della", idle(job_id="4242; rm -rf ~"), "is no Slurm job id"),
        ("della", idle(job_id="--me"), "is no Slurm job id"),
        ("della", idle(job_submit_ts=None), "no user or submit time of job 4242"),
        ("della", idle(user=None), "no user or submit time of job 4242"),
    ],
)
def test_no_action_on_an_unmapped_cluster_or_a_malformed_job_id(tmp_path, clusters, finding, why):
    """The final notice is the last word (it promises no cancellation) and `waiting` says why."""
    config = cfg(action_enabled="true", action_clusters=clusters)
    first, due = _final_then_due(tmp_path, finding, config)
    assert first.notices[0].action_at is None
    assert due.actions == [] and due.notices == []
    assert [(f.finding_id, w) for f, w in due.waiting] == [(finding.finding_id, ANY)]
    assert why in due.waiting[0][1]


def test_a_mapped_cluster_is_acted_on_through_its_own_endpoint(tmp_path):
    config = cfg(action_enabled="true", action_clusters="della=della-slurm, other")
    first, due = _final_then_due(tmp_path, idle(), config)
    assert first.notices[0].action_at is not None
    [action] = due.actions
    assert action.endpoint == "della-slurm"
    assert action.argv[:2] == ("scancel", "--clusters=della-slurm")


def test_one_alert_per_subject_per_rule_per_period(tmp_path):
    ledger, config = empty_ledger(tmp_path), cfg()
    over = idle(finding_id="f-over", detector="overallocated", job_state="COMPLETED")
    [n] = plan([over], ledger, config, NOW).notices
    record(ledger, n, NOW)
    grown = dataclasses.replace(over, gpu_h_at_stake=12.0)
    later = NOW + 3 * 60 * MIN
    assert plan([grown], ledger, config, later).notices == []
    # a second finding about the same subject from the same detector also waits
    twin = dataclasses.replace(over, finding_id="f-over-2")
    assert plan([twin], ledger, config, later).notices == []
    # a rise in severity does not wait
    worse = dataclasses.replace(grown, severity="critical")
    assert [n.finding.severity for n in plan([worse], ledger, config, later).notices] == [
        "critical"
    ]
    # unchanged findings are never sent again, period or not
    assert plan([over], ledger, config, NOW + dt.timedelta(days=30)).notices == []


def test_below_min_severity_is_not_sent(tmp_path):
    info = idle(severity="info", detector="overallocated")
    assert plan([info], empty_ledger(tmp_path), cfg(), NOW).notices == []
    assert len(plan([info], empty_ledger(tmp_path), cfg(min_severity="info"), NOW).notices) == 1


def routing(tmp_path, notice: Notice, config: AlertsConfig) -> list[tuple[str, str, str]]:
    path = tmp_path / "directory.toml"
    path.write_text(DIRECTORY_TOML, encoding="utf-8")
    directory = load_directory(path, "example.org", config.opt_out)
    return [
        (o.role, o.channel, o.recipient)
        for o in compose_notice(notice, directory, config, slack=True)
    ]


def test_routing_owner_managers_admins(tmp_path):
    config = cfg(admin_emails="admin@example.org")
    first = Notice(idle(60), Stage.NOTICE, True, False)
    assert routing(tmp_path, first, config) == [
        ("owner", "email", "alice@physics.example.org"),
        ("owner", "slack", "U0ALICE"),
    ]
    final = Notice(idle(120), Stage.FINAL, True, False)
    assert routing(tmp_path, final, config) == [
        ("owner", "email", "alice@physics.example.org"),
        ("owner", "slack", "U0ALICE"),
        ("manager", "email", "carol@example.org"),
        ("manager", "slack", "U0CAROL"),
        ("manager", "email", "pi@example.org"),
    ]
    hw = Notice(idle(subject_kind="node", user=None), Stage.NOTICE, False, False)
    assert routing(tmp_path, hw, config) == [("admin", "email", "admin@example.org")]


def test_opted_out_users_hear_only_what_they_must(tmp_path):
    config = cfg(opt_out="alice")
    notice = Notice(idle(60), Stage.NOTICE, True, False)
    assert routing(tmp_path, notice, config) == []
    final = Notice(idle(120), Stage.FINAL, True, False)
    assert ("owner", "email", "alice@physics.example.org") in routing(tmp_path, final, config)


def test_test_mode_goes_to_admins_only_and_does_not_count_as_sent(tmp_path):
    config = cfg(test_mode="true", admin_emails="admin@example.org")
    ledger = empty_ledger(tmp_path)
    [n] = plan([idle(60)], ledger, config, NOW).notices
    assert n.test_mode
    assert routing(tmp_path, n, config) == [("admin", "email", "admin@example.org")]
    record(ledger, n, NOW)
    # switching test mode off: the real notice still goes out
    assert len(plan([idle(61)], ledger, cfg(), NOW + MIN).notices) == 1


@settings(max_examples=examples(60), deadline=None)
@given(
    steps=st.lists(st.integers(min_value=1, max_value=45), min_size=1, max_size=25),
    deliver=st.lists(st.booleans(), min_size=25, max_size=25),
    interactive=st.booleans(),
)
def test_no_action_before_a_delivered_final_notice_and_its_grace(
    tmp_path_factory, steps, deliver, interactive
):
    """Whatever the poll times and delivery failures: stages only rise, each is said once,
    and the action comes only after the final notice was delivered at least
    action_after - final_notice minutes earlier (never for interactive jobs)."""
    ledger = empty_ledger(tmp_path_factory.mktemp("p"))
    config = cfg(action_enabled="true", action_clusters="della")
    grace = dt.timedelta(minutes=config.action_after_minutes - config.final_notice_minutes)
    minutes, stages, final_delivered = 0, [], None
    for step, ok in zip(steps, deliver, strict=False):
        minutes += step
        now = START + minutes * MIN
        decided = plan([idle(interactive=interactive)], ledger, config, now)
        if decided.actions:
            assert not interactive
            assert final_delivered is not None and now - final_delivered >= grace
            assert [a.argv for a in decided.actions] == [SCANCEL]
            return
        for n in decided.notices:
            stages.append(n.stage)
            record(ledger, n, now, delivered=ok)
            if n.stage == Stage.FINAL and ok:
                final_delivered = now
        if final_delivered is None and Stage.FINAL in stages:
            # the final notice was planned but not delivered yet: deliver it on a later poll
            for msg in ledger.due(now):
                if ok:
                    ledger.mark_delivered(msg.key, now)
                    final_delivered = now
    assert stages == sorted(set(stages))


def test_a_job_busy_again_is_not_escalated_or_cancelled(tmp_path):
    config = cfg(action_enabled="true")
    # idle from 08:00 to 09:00, busy since; the job still runs at 12:00
    was_idle = idle(240, end_ts=NOW - 180 * MIN)
    assert plan([was_idle], empty_ledger(tmp_path), config, NOW + 120 * MIN).actions == []
    decided = plan([was_idle], empty_ledger(tmp_path), config, NOW + 120 * MIN)
    assert [n.escalating for n in decided.notices] == [False]  # an ordinary notice, once
    # while the span is fresh, its length (not the wall clock) sets the stage
    fresh = idle(240, end_ts=NOW - 10 * MIN)
    assert idle_stage(fresh, config, NOW) == Stage.ACTION
    assert idle_stage(idle(100, end_ts=NOW - 10 * MIN), config, NOW) == Stage.NOTICE


def _episodes(first_start: float, episode_start: float, end: float, observed_end: float):
    """A finding of two idle runs (minutes after START): its span from the first run's start
    to the second's end, the second's start and the job's last observed time in evidence."""
    return idle(
        start_ts=START + first_start * MIN,
        end_ts=START + end * MIN,
        evidence={
            "episode_start_e": (START + episode_start * MIN).timestamp(),
            "observed_end_e": (START + observed_end * MIN).timestamp(),
        },
    )


def test_a_second_idle_episode_is_escalated_from_its_own_start_with_its_own_notices(tmp_path):
    """The probe's job 1064: idle, busy for hours, idle again. Counted from the first episode's
    start, the second got a 'Final notice' an hour in (no second notice) and was cancelled 70
    minutes in; an episode is escalated from its own start, with its own notices."""
    ledger = empty_ledger(tmp_path)
    config = cfg(action_enabled="true", action_clusters="della")
    sent: list[tuple[int, object]] = []
    # idle 0-75, busy 75-330, idle again from 330 on
    for minutes in (60, 75, 300, 390, 435, 450, 470, 480):
        if minutes <= 75:
            finding = _episodes(0, 0, minutes, minutes)
        elif minutes < 330:
            finding = _episodes(0, 0, 75, minutes)  # busy since 75
        else:
            finding = _episodes(0, 330, minutes, minutes)
        now = START + minutes * MIN
        decided = plan([finding], ledger, config, now)
        sent += [(minutes, n.stage) for n in decided.notices if n.escalating]
        sent += [(minutes, "action") for _ in decided.actions]
        for n in decided.notices:
            record(ledger, n, now)
        if decided.actions:
            break

    assert sent == [
        (60, Stage.NOTICE),
        (390, Stage.NOTICE),
        (435, Stage.SECOND),
        (450, Stage.FINAL),
        (480, "action"),
    ]


def test_notices_planned_while_the_data_lagged_count_for_the_episode_they_were_about(tmp_path):
    """The data reach the planner 10 minutes late. Idle 0-125, busy 125-130, idle again from
    130: the final notice planned at 130 (the data then at 120) was about the first episode;
    counted by the time it was planned, it was the second's, which got no notice and was
    cancelled at 290 (review)."""
    ledger = empty_ledger(tmp_path)
    config = cfg(action_enabled="true", action_clusters="della")
    sent: list[tuple[int, object]] = []
    for minutes in range(60, 400, 5):
        seen_to = minutes - 10
        if seen_to <= 125:
            finding = _episodes(0, 0, seen_to, seen_to)
        elif seen_to < 165:  # the second run not yet long enough to be one
            finding = _episodes(0, 0, 125, seen_to)
        else:
            finding = _episodes(0, 130, seen_to, seen_to)
        now = START + minutes * MIN
        decided = plan([finding], ledger, config, now)
        sent += [(minutes, n.stage) for n in decided.notices if n.escalating]
        sent += [(minutes, "action") for _ in decided.actions]
        for n in decided.notices:
            record(ledger, n, now)
        if decided.actions:
            break

    assert sent == [
        (70, Stage.NOTICE),
        (115, Stage.SECOND),
        (130, Stage.FINAL),
        (200, Stage.NOTICE),
        (245, Stage.SECOND),
        (260, Stage.FINAL),
        (290, "action"),
    ]


def test_a_job_busy_again_within_the_freshness_window_is_not_cancelled(tmp_path):
    """Idle from 0, final notice delivered at 120, busy from 150: at 170 its idle span ended
    20 minutes ago, within idle_fresh_minutes, and it was cancelled though observed busy."""
    ledger = empty_ledger(tmp_path)
    config = cfg(action_enabled="true", action_clusters="della")
    [final] = plan([_episodes(0, 0, 120, 120)], ledger, config, START + 120 * MIN).notices
    assert final.stage == Stage.FINAL
    record(ledger, final, START + 120 * MIN)
    now = START + 170 * MIN

    still_idle = plan([_episodes(0, 0, 170, 170)], ledger, config, now)
    busy_again = plan([_episodes(0, 0, 150, 170)], ledger, config, now)

    assert [a.argv for a in still_idle.actions] == [SCANCEL]
    assert busy_again.actions == []
    assert not any(n.escalating for n in busy_again.notices)


def test_an_escalated_finding_that_ends_is_summed_up_once(tmp_path):
    ledger, config = empty_ledger(tmp_path), cfg()
    running = idle(120)
    [final] = plan([running], ledger, config, NOW).notices
    assert final.stage == Stage.FINAL
    record(ledger, final, NOW)
    # the job ends: the finding gets an end time and its final GPU-hours
    ended = dataclasses.replace(running, job_state="COMPLETED", end_ts=NOW, gpu_h_at_stake=9.0)
    day = dt.timedelta(days=1)
    [summary] = plan([ended], ledger, config, NOW + day).notices
    assert (summary.stage, summary.escalating) == (Stage.NOTICE, False)
    record(ledger, summary, NOW + day)
    assert plan([ended], ledger, config, NOW + 3 * day).notices == []
