"""The configured action on idle jobs: a real program run with an argument list, audited."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3

import pytest

from app.alerts.actions import SubprocessRunner
from app.alerts.runner import Seams, run_cycle
from warehouse.lake import Lake

from .conftest import SmtpServer
from .factories import MIN, NOW, alerts_config, finding, job, land

pytestmark = pytest.mark.slow


def fake_scancel(tmp_path):
    """A stand-in for scancel that records its arguments (the same contract: argv, exit 0)."""
    calls = tmp_path / "scancel_calls.txt"
    script = tmp_path / "scancel"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{calls}"\necho cancelled "$5"\n')
    os.chmod(script, 0o755)
    return script, calls


def fake_squeue(tmp_path, submit):
    """A stand-in for squeue: job 4242 of alice, running, submitted at `submit` (as %s)."""
    script = tmp_path / "squeue"
    line = f"4242|alice|RUNNING|{int(submit.timestamp())}"
    script.write_text(f'#!/bin/sh\n[ "$SLURM_TIME_FORMAT" = "%s" ] || exit 3\necho "{line}"\n')
    os.chmod(script, 0o755)
    return script


def test_idle_job_is_warned_three_times_then_cancelled_once(tmp_path, smtp_server: SmtpServer):
    lake = tmp_path / "lake"
    start = NOW - 61 * dt.timedelta(minutes=1)
    land(lake, "findings", [finding(start_ts=start)])
    land(lake, "jobs", [job(start_ts=start, submit_ts=start - 5 * dt.timedelta(minutes=1))])
    script, calls = fake_scancel(tmp_path)
    squeue = fake_squeue(tmp_path, start - 5 * dt.timedelta(minutes=1))
    cfg = alerts_config(
        tmp_path,
        {
            "GPULEDGER_ALERTS_SMTP_PORT": str(smtp_server.port),
            "GPULEDGER_ALERTS_ACTION_ENABLED": "true",
            "GPULEDGER_ALERTS_SCANCEL_COMMAND": str(script),
            "GPULEDGER_ALERTS_SQUEUE_COMMAND": str(squeue),
            "GPULEDGER_ALERTS_ACTION_CLUSTERS": "della=della-slurm",
        },
    )
    subjects = []
    for minutes in (61, 106, 121, 140, 151, 160):
        now = start + dt.timedelta(minutes=minutes)
        before = len(smtp_server.received)
        run_cycle(
            Lake.at(lake), cfg, Seams(clock=lambda now=now: now, run_action=SubprocessRunner())
        )
        subjects.append(
            (
                minutes,
                [
                    r.message["Subject"].split(":")[0]
                    for r in smtp_server.received[before:]
                    if r.rcpt_tos == ["alice@physics.example.org"]
                ],
            )
        )
    assert subjects == [
        (61, ["[gpuledger] Notice"]),
        (106, ["[gpuledger] Second notice"]),
        (121, ["[gpuledger] Final notice"]),
        (140, []),
        (151, ["[gpuledger] Job cancelled"]),
        (160, []),
    ]
    final = next(r for r in smtp_server.received if "Final notice" in r.message["Subject"])
    assert "it will be cancelled at 2026-11-04 11:30 UTC" in final.part("plain")
    # once, on della's Slurm cluster only, with the job id as one argument after `--`
    argv = ["--clusters=della-slurm", "--user=alice", "--state=RUNNING", "--", "4242"]
    assert calls.read_text().splitlines() == argv
    con = sqlite3.connect(lake / "_state" / "alerts.sqlite")
    [(stored, code, output)] = con.execute(
        "SELECT argv, returncode, output FROM actions"
    ).fetchall()
    con.close()
    assert json.loads(stored) == [str(script), *argv]
    assert code == 0 and output == "cancelled 4242"


def _idle_job_lake(tmp_path, smtp_server: SmtpServer, scancel_exit: int = 0, **env: str):
    """The lake and configuration of the test above, with a scancel that exits `scancel_exit`."""
    lake = tmp_path / "lake"
    start = NOW - 61 * dt.timedelta(minutes=1)
    land(lake, "findings", [finding(start_ts=start)])
    land(lake, "jobs", [job(start_ts=start, submit_ts=start - 5 * dt.timedelta(minutes=1))])
    script, _ = fake_scancel(tmp_path)
    if scancel_exit:
        script.write_text(
            f"#!/bin/sh\necho 'scancel: error: Kill job error'\nexit {scancel_exit}\n"
        )
    squeue = fake_squeue(tmp_path, start - 5 * dt.timedelta(minutes=1))
    cfg = alerts_config(
        tmp_path,
        {
            "GPULEDGER_ALERTS_SMTP_PORT": str(smtp_server.port),
            "GPULEDGER_ALERTS_ACTION_ENABLED": "true",
            "GPULEDGER_ALERTS_SCANCEL_COMMAND": str(script),
            "GPULEDGER_ALERTS_SQUEUE_COMMAND": str(squeue),
            "GPULEDGER_ALERTS_ACTION_CLUSTERS": "della=della-slurm",
            **env,
        },
    )
    return lake, start, cfg


def _alice_mail(smtp_server: SmtpServer, before: int):
    return [r for r in smtp_server.received[before:] if r.rcpt_tos == ["alice@physics.example.org"]]


def test_a_failed_cancel_never_tells_the_owner_the_job_was_cancelled(
    tmp_path, smtp_server: SmtpServer
):
    lake, start, cfg = _idle_job_lake(tmp_path, smtp_server, scancel_exit=1)
    later = []
    for minutes in (61, 106, 121, 151, 160, 200):
        now = start + dt.timedelta(minutes=minutes)
        before = len(smtp_server.received)
        report = run_cycle(
            Lake.at(lake), cfg, Seams(clock=lambda now=now: now, run_action=SubprocessRunner())
        )
        if minutes >= 151:
            later.append([r.message["Subject"] for r in _alice_mail(smtp_server, before)])
            assert not report.actions or [code for _, code, _ in report.actions] == [1]
    # the final notice said the job would be cancelled; the cancel failed once and is not retried
    assert later == [[], [], []]
    con = sqlite3.connect(lake / "_state" / "alerts.sqlite")
    assert con.execute("SELECT count(*), max(returncode) FROM actions").fetchone() == (1, 1)
    con.close()


def test_the_run_that_cancels_a_job_sends_its_owner_one_email_with_everything(
    tmp_path, smtp_server: SmtpServer
):
    # no daily cap: alice has had three notices today, and the new finding is no final notice
    lake, start, cfg = _idle_job_lake(
        tmp_path, smtp_server, GPULEDGER_ALERTS_MAX_MESSAGES_PER_DAY="0"
    )
    for minutes in (61, 106, 121):
        now = start + dt.timedelta(minutes=minutes)
        run_cycle(
            Lake.at(lake), cfg, Seams(clock=lambda now=now: now, run_action=SubprocessRunner())
        )
    # a new finding about another of alice's jobs arrives in the run that cancels 4242
    now = start + dt.timedelta(minutes=151)
    other = finding(
        finding_id="f-over-4250",
        detector="overallocated",
        subject_id="4250",
        job_id="4250",
        start_ts=now - 300 * MIN,
        end_ts=now - 30 * MIN,
        detected_ts=now - 5 * MIN,
        message="8 GPUs allocated, 2 used",
        evidence='{"gpus_used": 2}',
    )
    land(lake, "findings", [other], batch="b2")
    before = len(smtp_server.received)
    report = run_cycle(Lake.at(lake), cfg, Seams(clock=lambda: now, run_action=SubprocessRunner()))
    assert [code for _, code, _ in report.actions] == [0]
    [mail] = _alice_mail(smtp_server, before)
    body = mail.part("plain")
    assert "4242" in body and "cancel" in body.lower()
    assert "4250" in body
