"""Messages read as the user who gets them: the action fits the job's state, the times agree
with the job's own record, sentences end once, and the user is told whom to write to.

Found by sending the alerts of a simulated 64-GPU week to a local SMTP server: idle notices
for jobs that had already completed told their owners to `scancel` them, said the waste began
before the job started (the finding's 5-minute bucket), ended some sentences with "..", and
told users to "reply to your cluster administrators" from an address nobody reads.
"""

from __future__ import annotations

import dataclasses

from app.alerts.compose import compose_notice
from app.alerts.directory import Directory, Person
from app.alerts.findings import FindingContext
from app.alerts.plan import Notice, Stage
from app.alerts.render import render_notice
from app.alerts.settings import AlertsConfig
from app.config import load_config

from .factories import MIN, NOW

IDLE = ("idle_job", "idle_gpu")
OWNER = Person(user="alice", email="alice@physics.example.org", name="Alice")


def idle(**over) -> FindingContext:
    """Job 4242 started at NOW - 128 min; the finding's span starts at its bucket, 130 min."""
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
        start_ts=NOW - 130 * MIN,
        job_start_ts=NOW - 128 * MIN,
        job_state="RUNNING",
        gpus=4,
        gpu_h_at_stake=8.5,
        message="Job 4242 (alice, 4 GPUs): all GPUs idle for 2.13 h.",
    )
    return dataclasses.replace(base, **over)


def text_of(f: FindingContext, contacts: tuple[str, ...] = ()) -> str:
    return render_notice(
        Notice(f, Stage.NOTICE, escalating=False, test_mode=False), OWNER, "owner", IDLE, contacts
    ).text


def line(text: str, start: str) -> str:
    [found] = [x for x in text.splitlines() if x.startswith(start)]
    return found


def test_a_running_idle_job_is_told_to_cancel_with_its_id():
    assert "`scancel 4242`" in line(text_of(idle()), "What to do:")


def test_an_ended_idle_job_is_not_told_to_cancel_it():
    ended = idle(job_state="COMPLETED", job_end_ts=NOW - 2 * MIN)
    todo = line(text_of(ended), "What to do:")

    assert "scancel" not in todo
    assert "Job 4242 has ended (completed), so there is nothing to cancel." in todo
    # the same when only the end time is known
    assert "scancel" not in line(text_of(idle(job_state=None, job_end_ts=NOW)), "What to do:")


def test_waste_never_starts_before_the_job():
    text = text_of(idle())
    started = (NOW - 128 * MIN).strftime("%Y-%m-%d %H:%M UTC")

    assert line(text, "Wasted:") == f"Wasted:     8.5 GPU-hours so far (since {started})"
    # a finding that starts after the job keeps its own start
    later = idle(start_ts=NOW - 60 * MIN)
    assert (NOW - 60 * MIN).strftime("%H:%M UTC)") in line(text_of(later), "Wasted:")


def test_the_headline_sentence_ends_with_one_full_stop():
    text = text_of(idle())

    assert "all GPUs idle for 2.13 h.\n" in text
    assert ".." not in text


def test_the_owner_is_told_whom_to_write_to():
    text = text_of(idle(), ("hpc-help@example.org",))

    assert "Questions, or to stop these messages: write to hpc-help@example.org." in text
    slack = render_notice(
        Notice(idle(), Stage.NOTICE, escalating=False, test_mode=False),
        OWNER,
        "owner",
        IDLE,
        ("h@x.org",),
    )
    assert "questions: h@x.org" in slack.blocks[-1]["elements"][0]["text"]


def test_the_contacts_are_the_reply_to_address_else_the_admins():
    def owner_text(**env: str) -> str:
        environ = {f"GPULEDGER_ALERTS_{k.upper()}": v for k, v in env.items()}
        cfg = load_config(None, environ=environ).section(AlertsConfig)
        directory = Directory(email_domain="example.org", users={"alice": OWNER})
        [message] = compose_notice(
            Notice(idle(), Stage.NOTICE, escalating=False, test_mode=False),
            directory,
            cfg,
            slack=False,
        )
        return str(message.payload["text"])

    admins = owner_text(admin_emails="a@x.org,b@x.org")
    assert "write to a@x.org, b@x.org." in admins
    helpdesk = owner_text(admin_emails="a@x.org", email_reply_to="help@x.org")
    assert "write to help@x.org." in helpdesk
    assert "reply to your cluster administrators" in owner_text()


def test_a_message_is_the_same_every_time_it_is_rendered():
    """Rendering is a pure function of the finding: the same text (and so the same idempotency
    key) on every run, which is what keeps a second run from sending it again."""
    assert text_of(idle(), ("a@x.org",)) == text_of(idle(), ("a@x.org",))


def test_a_models_forecast_is_said_as_one_never_as_gpu_hours_held_so_far():
    """Job 1109, 2 GPUs 22 minutes into a 13 h limit: the early-waste model's 25.5 GPU-hours
    (GPUs × the limit left) read "At stake: 25.5 GPU-hours so far (since …)"; the runtime
    model's figure is time limit the job likely will not use."""
    early = idle(detector="early_waste_model_15m", predicted=True, gpu_h_at_stake=25.5)
    runtime = idle(detector="runtime_quantiles_model", predicted=True, gpu_h_at_stake=12.0)

    assert line(text_of(early), "At stake:").split(":", 1)[1].strip() == (
        "25.5 GPU-hours if it runs to its time limit"
    )
    assert line(text_of(runtime), "At stake:").split(":", 1)[1].strip() == (
        "12.0 GPU-hours of time limit beyond what jobs like it run"
    )
    notice = Notice(early, Stage.NOTICE, escalating=False, test_mode=False)
    slack = str(render_notice(notice, OWNER, "owner", IDLE).blocks)
    assert "25.5 GPU-hours if it runs to its time limit" in slack and "so far" not in slack
    # a rule's figure is what the job held so far, since the waste began
    assert "8.5 GPU-hours so far (since " in line(text_of(idle()), "Wasted:")
