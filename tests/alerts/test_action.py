"""The configured action on idle jobs: a real program run with an argument list, audited."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3

import pytest

from app.alerts.actions import SubprocessRunner
from app.alerts.runner import Seams, run_cycle

from .conftest import SmtpServer
from .factories import NOW, alerts_config, finding, job, land

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
        run_cycle(lake, cfg, Seams(clock=lambda now=now: now, run_action=SubprocessRunner()))
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
