"""Alerts over a simulated lake: findings about real simulated jobs get the marts' context."""

from __future__ import annotations

import datetime as dt

import pytest
from click.testing import CliRunner

from app.cli import cli
from warehouse import queries
from warehouse.connection import connect

from .factories import land

pytestmark = pytest.mark.slow


def test_findings_about_simulated_jobs_show_their_usage(tmp_path):
    lake = tmp_path / "lake"
    runner = CliRunner()
    for args in (
        ["simulate", "--lake", str(lake), "--gpus", "16", "--days", "1", "--quiet"],
        ["attribute", "--lake", str(lake), "--quiet"],
    ):
        assert runner.invoke(cli, args).exit_code == 0
    con = connect(lake)
    # the simulated job with the most idle GPU-hours, as an idle detector would report it
    [top] = queries.run(
        con, "dashboard/top_jobs_by_idle", cluster="sim", start=None, end=None, limit=1
    ).to_dicts()
    usage = con.execute(
        "SELECT user, gpus, idle_gpu_h, start_ts FROM job_usage WHERE job_id = $j",
        {"j": top["job_id"]},
    ).fetchone()
    assert usage is not None
    user, gpus, idle_gpu_h, start = usage
    detected = start + dt.timedelta(hours=3)
    land(
        lake,
        "findings",
        [
            {
                "cluster": "sim",
                "finding_id": f"idle-{top['job_id']}",
                "detector": "overallocated",
                "severity": "warn",
                "subject_kind": "job",
                "subject_id": top["job_id"],
                "job_id": top["job_id"],
                "start_ts": start,
                "detected_ts": detected,
                "gpu_h_at_stake": idle_gpu_h,
                "message": "GPUs held but idle",
            }
        ],
    )
    env = {
        "GPULEDGER_ALERTS_QUIET_HOURS": "",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
        "GPULEDGER_ALERTS_LOOKBACK_HOURS": "1000000",
        "GPULEDGER_ALERTS_EMAIL_DOMAIN": "sim.example.org",
    }
    result = runner.invoke(cli, ["alert", "--dry-run", "--lake", str(lake)], env=env)
    assert result.exit_code == 0, result.output
    # the user and account come from the scheduler record, the activity from job_usage
    assert f"--- email → {user}@sim.example.org (notice, owner)" in result.output
    assert f"GPUs:       {gpus} on " in result.output
    assert "Activity:   busy " in result.output
    assert f"Wasted:     {idle_gpu_h:,.1f} GPU-hours so far" in result.output
    assert "Rank:       #1 of 1 user by" in result.output  # not "1 users"


def test_detect_since_sends_nothing_again_for_findings_already_notified(tmp_path, smtp_server):
    # H3: `detect --since` once rewrote findings from a shorter window, and the next alert
    # run mailed the new figures (or new user findings from one day labelled "7 days")
    lake = tmp_path / "lake"
    runner = CliRunner()
    now = "2026-12-02T00:00"
    for args in (
        ["simulate", "--lake", str(lake), "--gpus", "16", "--days", "1", "--quiet"],
        ["attribute", "--lake", str(lake), "--quiet"],
        ["detect", "--lake", str(lake), "--now", now, "-q"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
    env = {
        "GPULEDGER_ALERTS_QUIET_HOURS": "",
        "GPULEDGER_ALERTS_WORKDAYS": "mon,tue,wed,thu,fri,sat,sun",
        "GPULEDGER_ALERTS_LOOKBACK_HOURS": "1000000",
        "GPULEDGER_ALERTS_EMAIL_DOMAIN": "sim.example.org",
        "GPULEDGER_ALERTS_ADMIN_EMAILS": "admin@sim.example.org",
        "GPULEDGER_ALERTS_SMTP_HOST": "127.0.0.1",
        "GPULEDGER_ALERTS_SMTP_PORT": str(smtp_server.port),
        # a changed finding is notified again at once (not only a day later)
        "GPULEDGER_ALERTS_PERIOD_HOURS": "0.0001",
    }
    sent = runner.invoke(cli, ["alert", "--lake", str(lake)], env=env)
    assert sent.exit_code == 0, sent.output
    assert smtp_server.received
    result = runner.invoke(
        cli, ["detect", "--lake", str(lake), "--now", now, "--since", "2026-11-02T16:00", "-q"]
    )
    assert result.exit_code == 0, result.output
    again = runner.invoke(cli, ["alert", "--dry-run", "--lake", str(lake)], env=env)
    assert again.exit_code == 0, again.output
    assert "0 message(s) would be sent" in again.output, again.output
