"""Alerts a person reads (#21 point 4): one message per person and channel per run, most
GPU-hours first with each finding's own advice; a daily cap; overriding templates; one SMTP
connection per run."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.alerts.directory import Person
from app.alerts.findings import load_findings
from app.alerts.fixes import concrete_fix
from app.alerts.plan import Notice, Stage
from app.alerts.render import DigestRow, render_digest, render_person, sample_finding
from app.alerts.runner import Seams, run_cycle
from app.cli import cli
from warehouse.connection import connect
from warehouse.lake import Lake

from .conftest import SLACK_TOKEN, SlackServer, SmtpServer
from .factories import MIN, NOW, alerts_config, finding, job, land, usage

IDLE = ("idle_job",)


# ---------------------------------------------------------------- the person's digest


def test_a_persons_digest_lists_most_gpu_hours_first_each_with_its_own_advice():
    idle = sample_finding()
    over = dataclasses.replace(
        idle,
        finding_id="f-over",
        detector="overallocated",
        job_id="4300",
        subject_id="4300",
        gpu_h_at_stake=20.0,
        message="8 GPUs allocated, 2 used",
        evidence={"gpus_used": 2},
        gpus=8,
    )
    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    r = render_person(
        [
            (Notice(idle, Stage.NOTICE, True, False), "owner"),
            (Notice(over, Stage.NOTICE, False, False), "owner"),
        ],
        alice,
        IDLE,
    )

    text = r.text
    assert text.index("8 GPUs allocated, 2 used") < text.index("4 GPUs idle for 2 h")
    assert "2 alerts for you, 28.5 GPU-hours at stake" in text
    # each finding with the fix of its own detector, and only that
    first, second = text.split("\n2. ")
    assert concrete_fix(over, IDLE) in first and concrete_fix(idle, IDLE) not in first
    assert concrete_fix(idle, IDLE) in second and concrete_fix(over, IDLE) not in second
    assert r.subject.startswith("[gpuledger] 2 alerts, 28.5 GPU-hours at stake: Notice: 8 GPUs")
    assert len([b for b in r.blocks if b["type"] == "section"]) == 2
    assert "&lt;" not in r.html or "<" in text  # the HTML part is autoescaped
    assert r.html.count("<li>") == 2


def test_a_job_counts_once_in_a_persons_total_and_a_forecast_is_not_said_held_so_far():
    """A running job of 4 GPUs under a 72 h limit, 14 h in: the early-waste model's forecasts at
    15 and 30 minutes (GPUs × the limit left: 287 and 286 GPU-hours) and the memory-hold rule's
    56.5 GPU-hours held so far were summed (629.5, more than the 288 the job can ever hold),
    and each forecast read "287.0 GPU-hours so far"."""
    held = dataclasses.replace(
        sample_finding(),
        finding_id="f-hold",
        detector="memory_hold",
        job_id="1085",
        subject_id="1085",
        gpus=4,
        gpu_h_at_stake=56.5,
        message="4 GPUs hold memory but compute nothing",
    )
    early = [
        dataclasses.replace(
            held,
            finding_id=f"f-early-{minutes}",
            detector=f"early_waste_model_{minutes}m",
            predicted=True,
            gpu_h_at_stake=gpu_h,
            message=f"Job 1085 looks likely to waste its GPUs ({minutes} min in)",
        )
        for minutes, gpu_h in ((15, 287.0), (30, 286.0))
    ]
    other = dataclasses.replace(held, finding_id="f-other", job_id="1090", subject_id="1090")
    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    r = render_person(
        [(Notice(f, Stage.NOTICE, True, False), "owner") for f in (held, *early, other)],
        alice,
        IDLE,
    )

    assert "4 alerts for you, 343.5 GPU-hours at stake" in r.text  # 287 + 56.5
    assert "287.0 GPU-hours if it runs to its time limit" in r.text
    assert "287.0 GPU-hours so far" not in r.text and "286.0 GPU-hours so far" not in r.text
    assert r.text.count("56.5 GPU-hours so far (since") == 2
    assert "287.0 GPU-hours if it runs to its time limit" in r.html
    # an ended job's forecast figure is what it held after the prediction: so far
    ended = dataclasses.replace(early[0], job_end_ts=NOW, job_state="COMPLETED")
    alone = render_person([(Notice(ended, Stage.NOTICE, True, False), "owner")], alice, IDLE)
    assert "287.0 GPU-hours so far" in alone.text
    # ... but a forecast stored while it ran stays one after it ended (review: an alert run
    # between the job's end and the next detect read it "so far")
    stored = dataclasses.replace(ended, evidence={"forecast": True})
    alone = render_person([(Notice(stored, Stage.NOTICE, True, False), "owner")], alice, IDLE)
    assert "287.0 GPU-hours if it runs to its time limit" in alone.text
    held = dataclasses.replace(early[0], evidence={"forecast": False})
    alone = render_person([(Notice(held, Stage.NOTICE, True, False), "owner")], alice, IDLE)
    assert "287.0 GPU-hours so far" in alone.text


def test_a_job_id_in_capitals_is_written_as_the_scheduler_wrote_it():
    """Jinja's `capitalize` lowercased all but the first letter: job F2 read "Job f2" below
    its own headline "Job F2"."""
    finding = dataclasses.replace(sample_finding(), job_id="F2", subject_id="F2")
    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")

    r = render_person([(Notice(finding, Stage.NOTICE, True, False), "owner")], alice, IDLE)

    assert "Job F2 (train-llm) on sample." in r.text
    assert "Job F2 (train-llm) on sample." in r.html
    assert "f2" not in r.text and "f2" not in r.html


def test_the_job_cancelled_message_does_not_advise_cancelling_it():
    """The action's notice is made while the lake still shows the job running: under "Job
    cancelled" it read "If the job is stuck, cancel it: `scancel 4242`"."""
    from app.alerts.render import render_notice

    running = dataclasses.replace(sample_finding(), job_state="RUNNING", job_end_ts=None)
    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    cancelled = Notice(running, Stage.ACTION, True, False)

    one = render_notice(cancelled, alice, "owner", IDLE)
    digest = render_person([(cancelled, "owner")], alice, IDLE)

    for text in (one.text, digest.text):
        assert "scancel" not in text, text
        assert "nothing to cancel" in text
    # the notices before the action still say how to cancel it
    final = render_notice(Notice(running, Stage.FINAL, True, False), alice, "owner", IDLE)
    assert "scancel" in final.text


def test_times_are_told_in_the_sites_time_zone_with_utc_beside_them():
    """A New York site's users read "it will be cancelled at 2026-12-01 16:31 UTC"."""
    from app.alerts.render import render_notice

    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    at = dt.datetime(2026, 12, 1, 16, 31, tzinfo=dt.UTC)
    final = Notice(sample_finding(), Stage.FINAL, True, False, action_at=at)

    local = render_notice(final, alice, "owner", IDLE, timezone="America/New_York")
    digest = render_person([(final, "owner")], alice, IDLE, timezone="America/New_York")
    plain = render_notice(final, alice, "owner", IDLE)

    for text in (local.text, digest.text):
        assert "2026-12-01 11:31 EST (2026-12-01 16:31 UTC)" in text, text
    assert "2026-12-01 16:31 UTC" in plain.text and "EST" not in plain.text


def test_the_messages_queued_take_the_configured_time_zone(tmp_path):
    from app.alerts.compose import compose_notice
    from app.alerts.directory import load_directory

    cfg = alerts_config(tmp_path, {"GPULEDGER_ALERTS_TIMEZONE": "America/New_York"})
    at = dt.datetime(2026, 12, 1, 16, 31, tzinfo=dt.UTC)
    final = Notice(sample_finding(), Stage.FINAL, True, False, action_at=at)
    directory = load_directory(cfg.directory, cfg.email_domain, cfg.opt_out)

    [first, *_] = compose_notice(final, directory, cfg, slack=False)

    assert "11:31 EST (2026-12-01 16:31 UTC)" in first.payload["text"]


def test_a_job_no_telemetry_saw_is_not_said_to_have_gpus_never_active():
    """ "Activity: 0 of 1 GPU never active" read as known where no sample was seen."""
    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    seen = sample_finding()
    unseen = dataclasses.replace(seen, busy_mean=None, gpus_never_active=0)

    def text(finding):
        notice = Notice(finding, Stage.NOTICE, True, False)
        return render_person([(notice, "owner")], alice, IDLE).text

    assert "never active" not in text(unseen)
    assert "never active" in text(dataclasses.replace(seen, gpus_never_active=1))


# ---------------------------------------------------------------- cap and quiet hours


def _lake_with_jobs(lake: Path, ids: list[str], user: str = "alice") -> None:
    land(
        lake,
        "findings",
        [
            finding(
                finding_id=f"f-{i}",
                detector="overallocated",
                subject_id=i,
                job_id=i,
                user=user,
                end_ts=NOW - 60 * MIN,
                gpu_h_at_stake=float(n + 1),
                message=f"job {i}: 8 GPUs allocated, 2 used",
            )
            for n, i in enumerate(ids)
        ],
        batch=f"b-{ids[0]}",
    )
    land(lake, "jobs", [job(job_id=i, user=user, state="COMPLETED") for i in ids], f"j-{ids[0]}")
    land(lake, "job_usage", [usage(job_id=i) for i in ids], f"u-{ids[0]}")


@pytest.mark.live
def test_the_daily_cap_holds_further_notices_until_the_next_local_day(tmp_path, smtp_server):
    lake = tmp_path / "lake"
    cfg = alerts_config(
        tmp_path,
        {
            "GPULEDGER_ALERTS_SMTP_PORT": str(smtp_server.port),
            "GPULEDGER_ALERTS_MAX_MESSAGES_PER_DAY": "2",
            "GPULEDGER_ALERTS_TIMEZONE": "Europe/Berlin",
            "GPULEDGER_ALERTS_QUIET_HOURS": "",
            "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
        },
    )
    to_alice = []
    clock = NOW
    for batch in (["5001", "5002"], ["5003"], ["5004"]):
        _lake_with_jobs(lake, batch)
        run_cycle(Lake.at(lake), cfg, Seams(clock=lambda c=clock: c, sleep=lambda s: None))
        to_alice = [r for r in smtp_server.received if r.rcpt_tos == ["alice@physics.example.org"]]
        clock += dt.timedelta(hours=1)
    # run 1: one message of two findings; run 2: one message; run 3: capped (2 a day)
    assert len(to_alice) == 2
    assert "2 alerts for you" in to_alice[0].part("plain")
    assert "job 5004" not in "".join(r.part("plain") for r in to_alice)
    # 23:30 in Berlin is still the same day; 00:30 the next
    late = dt.datetime(2026, 11, 4, 22, 30, tzinfo=dt.UTC)
    run_cycle(Lake.at(lake), cfg, Seams(clock=lambda: late, sleep=lambda s: None))
    assert len([r for r in smtp_server.received if r.rcpt_tos[0].startswith("alice")]) == 2
    next_day = dt.datetime(2026, 11, 4, 23, 30, tzinfo=dt.UTC)
    run_cycle(Lake.at(lake), cfg, Seams(clock=lambda: next_day, sleep=lambda s: None))
    to_alice = [r for r in smtp_server.received if r.rcpt_tos[0].startswith("alice")]
    assert len(to_alice) == 3 and "job 5004" in to_alice[-1].part("plain")


@pytest.mark.live
def test_quiet_hours_are_measured_in_the_sites_time_zone(tmp_path, smtp_server):
    lake = tmp_path / "lake"
    _lake_with_jobs(lake, ["6001"])
    env = {
        "GPULEDGER_ALERTS_SMTP_PORT": str(smtp_server.port),
        "GPULEDGER_ALERTS_QUIET_HOURS": "20:00-08:00",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
    }
    # NOW is 10:00 UTC: 02:00 in Los Angeles (quiet), 11:00 in Berlin (not)
    quiet = alerts_config(tmp_path, env | {"GPULEDGER_ALERTS_TIMEZONE": "America/Los_Angeles"})
    report = run_cycle(Lake.at(lake), quiet, Seams(clock=lambda: NOW, sleep=lambda s: None))
    assert report.notices == [] and not smtp_server.received
    assert any("quiet hours" in why for _, why in report.waiting)
    awake = alerts_config(tmp_path, env | {"GPULEDGER_ALERTS_TIMEZONE": "Europe/Berlin"})
    run_cycle(Lake.at(lake), awake, Seams(clock=lambda: NOW, sleep=lambda s: None))
    assert ["alice@physics.example.org"] in [r.rcpt_tos for r in smtp_server.received]


# ---------------------------------------------------------------- a simulated week


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A simulated week, attributed and detected; its users."""
    lake = tmp_path_factory.mktemp("week") / "lake"
    runner = CliRunner()
    for args in (
        ["simulate", "--lake", str(lake), "--gpus", "16", "--days", "7", "--quiet"],
        ["attribute", "--lake", str(lake), "--quiet"],
        ["detect", "--lake", str(lake), "-q"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
    users = sorted(
        {f.user for f in load_findings(connect(lake), dt.datetime(2000, 1, 1, tzinfo=dt.UTC))}
        - {None}
    )
    return lake, users


def fresh_copy(lake: Path, tmp_path: Path) -> Path:
    """The week's lake with no alert ledger yet (each test starts from nothing sent)."""
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy, ignore=shutil.ignore_patterns("_state"))
    return copy


def week_env(tmp_path: Path, smtp: SmtpServer, slack: SlackServer, users: list[str]) -> dict:
    directory = tmp_path / "directory.toml"
    directory.write_text(
        "".join(f'[users."{u}"]\nslack_id = "U{u.upper()}"\n' for u in users), encoding="utf-8"
    )
    return {
        "GPULEDGER_ALERTS_DIRECTORY": str(directory),
        "GPULEDGER_ALERTS_EMAIL_DOMAIN": "sim.example.org",
        "GPULEDGER_ALERTS_ADMIN_EMAILS": "admin@sim.example.org",
        "GPULEDGER_ALERTS_SMTP_HOST": "127.0.0.1",
        "GPULEDGER_ALERTS_SMTP_PORT": str(smtp.port),
        "GPULEDGER_ALERTS_SLACK_TOKEN": SLACK_TOKEN,
        "GPULEDGER_ALERTS_SLACK_API_URL": slack.api_url,
        "GPULEDGER_ALERTS_LOOKBACK_HOURS": "1000000",
        "GPULEDGER_ALERTS_QUIET_HOURS": "",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
        "GPULEDGER_ALERTS_MIN_SEVERITY": "info",
    }


@pytest.mark.live
@pytest.mark.slow
def test_one_run_over_a_week_sends_each_person_one_email_and_one_slack_message(
    week, tmp_path, smtp_server, slack_server
):
    lake, users = week
    lake = fresh_copy(lake, tmp_path)
    env = week_env(tmp_path, smtp_server, slack_server, users)

    first = CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)

    assert first.exit_code == 0, first.output
    emails = collections.Counter(r.rcpt_tos[0] for r in smtp_server.received)
    dms = collections.Counter(p["channel"] for p in slack_server.state.posts)
    people = {e: n for e, n in emails.items() if e != "admin@sim.example.org"}
    assert people and max(people.values()) == 1, emails
    assert dms and max(dms.values()) == 1, dms
    # the admins too: their own alerts (hardware, no owner) ride in the digest due this run
    assert emails["admin@sim.example.org"] == 1, emails
    (admin,) = [r for r in smtp_server.received if r.rcpt_tos[0] == "admin@sim.example.org"]
    assert "gpuledger digest" in admin.part("plain")
    assert "For you" in admin.part("plain")
    digests = [r for r in smtp_server.received if "alerts for you" in r.part("plain")]
    assert digests, "nobody had more than one finding: the week is too quiet for this test"
    assert len(smtp_server.handler.sessions) == 1  # one SMTP connection for the whole run
    sent = len(smtp_server.received), len(slack_server.state.posts)

    second = CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)

    assert second.exit_code == 0, second.output
    assert "0 new notice(s), 0 message(s) delivered" in second.output
    assert (len(smtp_server.received), len(slack_server.state.posts)) == sent


# ---------------------------------------------------------------- overriding templates

GOOD_TEXT = (
    "CUSTOM for {{ to.greeting_name }}: {% for i in items %}{{ i.headline }}; {% endfor %}\n"
)
GOOD_NOTICE = "CUSTOM for {{ to.greeting_name }}: {{ headline }}\n"


@pytest.mark.live
@pytest.mark.slow
def test_an_overriding_template_changes_the_email(week, tmp_path, smtp_server, slack_server):
    lake, users = week
    lake = fresh_copy(lake, tmp_path)
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "person.txt.j2").write_text(GOOD_TEXT, encoding="utf-8")
    (folder / "notice.txt.j2").write_text(GOOD_NOTICE, encoding="utf-8")
    env = week_env(tmp_path, smtp_server, slack_server, users)
    env["GPULEDGER_ALERTS_TEMPLATES_DIR"] = str(folder)

    checked = CliRunner().invoke(cli, ["config", "check"], env=env)
    result = CliRunner().invoke(cli, ["alert", "--lake", str(lake)], env=env)

    assert checked.exit_code == 0, checked.output
    assert result.exit_code == 0, result.output
    people = [r for r in smtp_server.received if r.rcpt_tos != ["admin@sim.example.org"]]
    assert people and all(r.part("plain").startswith("CUSTOM for ") for r in people)
    # the shipped templates are the fallback: the HTML part is the shipped one
    assert all("<!DOCTYPE html>" in r.part("html") for r in people)


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("person.html.j2", "{% for i in %}", "person.html.j2 line 1: "),
        ("notice.txt.j2", "{{ no_such_value }}", "a template does not render: UndefinedError"),
        ("person.slack.json.j2", "[{{ count }},]", "a Slack template does not give JSON"),
        ("persn.txt.j2", "hi", "persn.txt.j2 is no template gpuledger uses"),
    ],
)
def test_config_check_refuses_a_broken_override_with_one_line(tmp_path, name, text, why):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / name).write_text(text, encoding="utf-8")
    good = tmp_path / "good"
    good.mkdir()
    (good / "person.txt.j2").write_text(GOOD_TEXT, encoding="utf-8")

    broken = CliRunner().invoke(
        cli, ["config", "check"], env={"GPULEDGER_ALERTS_TEMPLATES_DIR": str(folder)}
    )
    fine = CliRunner().invoke(
        cli, ["config", "check"], env={"GPULEDGER_ALERTS_TEMPLATES_DIR": str(good)}
    )

    assert broken.exit_code == 1
    [last] = broken.output.strip().splitlines()[-1:]
    assert last.startswith(f"Error: alerts.templates_dir: {why}"), broken.output
    assert "Traceback" not in broken.output
    assert fine.exit_code == 0, fine.output


def test_a_final_notice_told_in_a_persons_digest_counts_as_delivered_to_the_owner(tmp_path):
    # the action waits for the owner's final notice: one message may carry several notices
    from app.alerts.ledger import Ledger

    ledger = Ledger.open(tmp_path / "alerts.sqlite")
    common = {"subject_key": "s", "detector": "idle_job", "severity": "warn", "now": NOW}
    final = ledger.add_notice(
        cluster="c",
        finding_id="f1",
        stage=int(Stage.FINAL),
        fingerprint="a",
        test_mode=False,
        **common,
    )
    other = ledger.add_notice(
        cluster="c",
        finding_id="f2",
        stage=int(Stage.FINAL),
        fingerprint="b",
        test_mode=False,
        **common,
    )
    assert final is not None and other is not None
    for key, role, notices in (
        ("to-owner", "owner", [(other, "owner"), (final, "owner")]),
        ("to-manager", "manager", [(other, "manager")]),
    ):
        ledger.add_message(
            key=key,
            notice_id=notices[0][0],
            kind="notice",
            role=role,
            channel="email",
            recipient=f"{key}@x",
            payload={},
            now=NOW,
        )
        ledger.link_notices(key, notices)
    assert ledger.final_delivered_at("c", "f1") is None  # queued, not delivered
    ledger.mark_delivered("to-owner", NOW + MIN)

    assert ledger.final_delivered_at("c", "f1") == NOW + MIN  # not the message's first notice
    assert ledger.messages_to("email", "to-owner@x", NOW) == 1


def test_a_users_rank_counts_each_of_their_jobs_once(tmp_path):
    # alice's one job has two findings (10 and 8 GPU-hours: views of the same hours), bob's one
    # job 15: bob has more at stake; summed, alice's 18 ranked her first
    lake = tmp_path / "lake"
    land(
        lake,
        "findings",
        [
            finding(finding_id="a1", gpu_h_at_stake=10.0),
            finding(finding_id="a2", detector="memory_hold", gpu_h_at_stake=8.0),
            finding(
                finding_id="b1", job_id="5000", subject_id="5000", user="bob", gpu_h_at_stake=15.0
            ),
        ],
    )
    found = load_findings(connect(lake), NOW - 60 * MIN)

    ranks = {f.user: (f.user_rank, f.user_gpu_h_at_stake) for f in found}
    assert ranks == {"bob": (1, pytest.approx(15.0)), "alice": (2, pytest.approx(10.0))}


def test_a_finding_about_a_user_counts_their_jobs_waste_not_on_top_of_it(tmp_path):
    # The probe: hana was told "2 alerts, 60.6 GPU-hours at stake" of the 51.1 her jobs held:
    # her week's efficiency finding (the waste of all her jobs) was added to a job's idle one
    def user_finding(gpu_h: float, who: str = "alice") -> dict[str, object]:
        return finding(
            finding_id=f"u-{who}",
            detector="low_efficiency_user",
            subject_kind="user",
            subject_id=who,
            job_id=None,
            user=who,
            gpu_h_at_stake=gpu_h,
        )

    rows = [
        user_finding(40.0),
        finding(finding_id="a1", gpu_h_at_stake=10.0),
        finding(finding_id="a2", job_id="4243", subject_id="4243", gpu_h_at_stake=12.0),
        # bob: his jobs' findings add up to more than his user finding
        user_finding(5.0, "bob"),
        finding(finding_id="b1", job_id="5000", subject_id="5000", user="bob", gpu_h_at_stake=9),
    ]
    lake = tmp_path / "lake"
    land(lake, "findings", rows)
    found = load_findings(connect(lake), NOW - 60 * MIN)

    totals = {f.user: f.user_gpu_h_at_stake for f in found}
    assert totals == {"alice": pytest.approx(40.0), "bob": pytest.approx(9.0)}
    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    mine = [f for f in found if f.user == "alice"]
    r = render_person([(Notice(f, Stage.NOTICE, True, False), "owner") for f in mine], alice, IDLE)
    assert "3 alerts for you, 40.0 GPU-hours at stake" in r.text
    digest = render_digest([DigestRow.of(Notice(f, Stage.NOTICE, True, False)) for f in found], NOW)
    assert "49.0 GPU-hours at stake" in digest.subject  # 40 + 9, not 76


def test_one_detectors_findings_about_a_job_share_its_figure_and_are_summed(tmp_path):
    # three slow GPUs of one job: each straggler finding carries its part of the job's loss
    # (1.5 + 1.0 + 0.5 of 3.0); the largest alone said "3 alerts, 1.5 GPU-hours at stake"
    slow = [
        dataclasses.replace(
            sample_finding(),
            finding_id=f"s{gpu}",
            detector="straggler_gpu",
            subject_kind="gpu",
            subject_id=f"GPU-{gpu}",
            gpu_h_at_stake=gpu_h,
        )
        for gpu, gpu_h in ((0, 1.5), (1, 1.0), (2, 0.5))
    ]
    alice = Person("alice", "alice@example.org", "U0ALICE", "Alice")
    r = render_person([(Notice(f, Stage.NOTICE, True, False), "owner") for f in slow], alice, IDLE)
    assert "3 alerts for you, 3.0 GPU-hours at stake" in r.text

    lake = tmp_path / "lake"
    land(
        lake,
        "findings",
        [
            finding(
                finding_id=f"s{gpu}",
                detector="straggler_gpu",
                subject_kind="gpu",
                subject_id=f"GPU-{gpu}",
                gpu_h_at_stake=gpu_h,
            )
            for gpu, gpu_h in ((0, 1.5), (1, 1.0), (2, 0.5))
        ]
        + [finding(finding_id="idle", gpu_h_at_stake=2.0)],
    )
    [total] = {f.user_gpu_h_at_stake for f in load_findings(connect(lake), NOW - 60 * MIN)}
    assert total == pytest.approx(3.0)  # the stragglers' 3.0 above the idle finding's 2.0


def test_a_lake_whose_data_stopped_keeps_its_predictions_in_the_lookback(tmp_path):
    # the data end 10 days before the alerter's clock: a rule's finding is stamped with the
    # clock of the run that found it, a model's with the data's time it was predictable at;
    # a week's lookback from the clock kept the rule's and dropped the prediction
    lake = tmp_path / "lake"
    stale = NOW - dt.timedelta(days=10)
    land(lake, "jobs", [job(start_ts=stale - 130 * MIN, updated_ts=stale)])
    land(
        lake,
        "findings",
        [
            finding(finding_id="rule", detected_ts=NOW - 5 * MIN),
            finding(
                finding_id="model",
                detector="early_waste_model_15m",
                predicted=True,
                detected_ts=stale - 115 * MIN,
            ),
            finding(finding_id="old", detected_ts=stale - dt.timedelta(days=8)),
        ],
    )
    week = dt.timedelta(days=7)

    found = load_findings(connect(lake), NOW - week, NOW)
    assert sorted(f.finding_id for f in found) == ["model", "rule"]
    # without the clock, the window is as given
    assert [f.finding_id for f in load_findings(connect(lake), NOW - week)] == ["rule"]
