"""`gpuledger report weekly` and `gpuledger collect slurm-shares` at the command line."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from collector.sources.slurm.assoc import parse_associations, sacctmgr_argv
from tests.report.lake import fairness_lake
from warehouse.lake import Lake

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "slurm"
    / "associations"
    / "sacctmgr-show-assoc.txt"
)


def invoke(*args: str, **env: str) -> Result:
    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GPULEDGER_")}
    return CliRunner(env={**clean, **env}).invoke(cli, list(args))


def one_error(result: Result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    for fragment in fragments:
        assert fragment in errors[0], result.output


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report-cli") / "lake"
    fairness_lake(tmp_path_factory, root).close()
    return root


def test_help_teaches_the_options():
    result = invoke("report", "weekly", "--help")
    assert result.exit_code == 0
    for text in ("--week", "YYYY-Www", "--out", "--email", "--cost-per-gpu-hour",
                 "--cost-per-kwh", "--share", "--half-life-days", "--lake", "Example"):  # fmt: skip
        assert text in result.output, text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--week", "2024-09"], "expected YYYY-Www"),
        (["--week", "2021-W53"], "2021 has no week 53"),
        (["--week", "9999-W52"], "expected a year from"),
        (["--week", "0001-W01"], "expected a year from"),
        (["--share", "physics"], "expected ACCOUNT=SHARES"),
        (["--share", "physics=-1"], "expected ACCOUNT=SHARES"),
        (["--share", "physics=nan"], "expected ACCOUNT=SHARES"),
        (["--share", "physics=inf"], "expected ACCOUNT=SHARES"),
        (["--cost-per-gpu-hour", "-2"], "--cost-per-gpu-hour"),
        (["--email"], "--email needs recipients"),
    ],
)
def test_bad_options_are_usage_errors(lake, tmp_path, args, fragment):
    result = invoke("report", "weekly", "--lake", str(lake), "--out", str(tmp_path), *args)
    one_error(result, 2, fragment)


def test_unknown_cluster_and_empty_lake_are_one_line_errors(lake, tmp_path):
    one_error(
        invoke("report", "weekly", "--lake", str(lake), "--cluster", "nope", "--week", "2024-W09"),
        1,
        "no cluster 'nope'",
        "known: della",
    )
    one_error(invoke("report", "weekly", "--lake", str(tmp_path / "none")), 1, "has no data")


@pytest.mark.live
@pytest.mark.slow
def test_weekly_writes_html_pdf_and_tables(lake, tmp_path):
    result = invoke(
        "report", "weekly", "--lake", str(lake), "--week", "2024-W09", "--out", str(tmp_path),
        "--cost-per-gpu-hour", "2.5", "--share", "ignored=1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    folder = tmp_path / "della" / "2024-W09"
    assert (folder / "fairness-della-2024-W09.html").is_file()
    assert (folder / "fairness-della-2024-W09.pdf").read_bytes()[:5] == b"%PDF-"
    assert (folder / "tables" / "accounts.parquet").is_file()
    assert str(folder / "fairness-della-2024-W09.pdf") in result.output


def test_an_out_folder_that_cannot_be_created_is_one_line_error(lake, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    result = invoke(
        "report", "weekly", "--lake", str(lake), "--week", "2024-W02",
        "--out", str(blocker / "reports"), "--no-pdf",
    )  # fmt: skip
    one_error(result, 1, str(blocker / "reports"), "--out")


def test_an_empty_week_is_a_report_not_an_error(lake, tmp_path):
    result = invoke(
        "report", "weekly", "--lake", str(lake), "--week", "2024-W02", "--out", str(tmp_path),
        "--no-pdf",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # One line that names the weeks that do have data.
    [line] = [ln for ln in result.output.splitlines() if "2024-W02" in ln]
    assert "no data this week" in line
    assert "della has data in 2024-W09 to 2024-W10" in line
    html = (tmp_path / "della" / "2024-W02" / "fairness-della-2024-W02.html").read_text()
    assert "No GPU jobs ran on" in html
    assert "2024-W09 to 2024-W10" in html


def test_a_report_to_files_reads_the_lake_alone_of_the_configuration(lake, tmp_path):
    # the SMTP secret of [alerts] is read to send the mail, not to write the report
    config = tmp_path / "gpuledger.toml"
    config.write_text(
        f'lake = "{lake}"\n[alerts]\nsmtp_password_file = "{tmp_path / "not-mine"}"\n'
    )
    result = invoke(
        "report", "weekly", "--config", str(config), "--week", "2024-W09",
        "--out", str(tmp_path / "out"), "--no-pdf",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "della" / "2024-W09" / "fairness-della-2024-W09.html").is_file()


def test_without_week_the_week_the_data_cover_longest_is_reported(lake, tmp_path):
    # The lake's data begin on Friday of 2024-W09 and end half an hour into W10: no week is
    # whole, and W09 holds the most of them, whatever today's date (the old default, the last
    # complete week before today, had nothing in it). It is said to be covered in part.
    result = invoke("report", "weekly", "--lake", str(lake), "--out", str(tmp_path), "--no-pdf")
    assert result.exit_code == 0, result.output
    assert "2024-W09, covered in part" in result.output
    assert "2024-W09 to 2024-W10" in result.output
    assert "no data" not in result.output
    assert (tmp_path / "della" / "2024-W09" / "fairness-della-2024-W09.html").is_file()


@pytest.mark.parametrize(
    ("now", "said"),
    [
        # the data stop on a Wednesday of W02, long ago: that week is no week "in progress"
        (
            dt.datetime(2026, 12, 7, tzinfo=dt.UTC),
            "covered in part: the data begin or end inside it",
        ),
        (dt.datetime(2025, 1, 9, tzinfo=dt.UTC), "the current week, in progress"),
    ],
)
def test_a_partial_default_week_is_in_progress_only_while_it_lasts(now, said, capsys):
    from app.commands.report import _default_week
    from app.report.data import DataWeeks
    from app.report.week import IsoWeek

    w02 = IsoWeek(2025, 2)
    found = DataWeeks([w02], dt.datetime(2025, 1, 8, 12, tzinfo=dt.UTC))
    assert _default_week(found, now, IsoWeek(2024, 52)) == w02
    assert f"reporting 2025-W02, {said} (data in 2025-W02)" in capsys.readouterr().out


def test_help_says_what_the_default_week_is():
    result = invoke("report", "weekly", "--help")
    assert "the latest week the data cover whole" in " ".join(result.output.split())


def test_default_week_is_the_last_complete_one():
    from app.report.week import last_complete_week

    monday = dt.datetime(2026, 11, 30, 0, 0, tzinfo=dt.UTC)  # Monday of W49
    assert last_complete_week(monday).label == "2026-W48"
    assert last_complete_week(monday + dt.timedelta(days=6, hours=23)).label == "2026-W48"
    assert last_complete_week(monday - dt.timedelta(seconds=1)).label == "2026-W47"
    assert last_complete_week(dt.datetime(2027, 1, 4, tzinfo=dt.UTC)).label == "2026-W53"


def test_default_week_is_the_latest_week_with_data_that_the_data_cover():
    from app.report.week import IsoWeek, default_week

    now = dt.datetime(2026, 12, 3, 15, tzinfo=dt.UTC)  # a Thursday of W49
    w45, w46, w48, w49 = (IsoWeek(2026, n) for n in (45, 46, 48, 49))
    # A backfilled lake whose last sample ends 30 s into W46: W45, not W48 (empty) nor W46.
    assert default_week([w45, w46], w46.start + dt.timedelta(seconds=30), now) == w45
    # A live lake on a Thursday: last week, not the one in progress.
    assert default_week([w48, w49], now, now) == w48
    # Only the current week has data: the current week.
    assert default_week([w49], now, now) == w49
    # Data in the future (clock skew) do not count; no data: no default.
    assert default_week([w45, IsoWeek(2027, 2)], w45.end, now) == w45
    assert default_week([], None, now) is None
    assert default_week([IsoWeek(2027, 2)], None, now) is None


def test_parse_real_sacctmgr_associations():
    rows, bad = parse_associations(FIXTURE.read_text(), "testcluster")
    assert not bad
    got = {(r.account, r.user): (r.parent, r.raw_shares) for r in rows}
    assert got == {
        ("root", None): (None, 1),
        ("root", "root"): (None, 1),
        ("ml", None): ("root", 40),
        ("ml", "bob"): (None, 1),
        ("ml", "carol"): (None, 1),
        ("research", None): ("root", 60),
        ("research", "alice"): (None, 1),
        ("research", "carol"): (None, 1),
        ("research", "root"): (None, 1),
    }


def test_parse_skips_other_clusters_and_reports_bad_lines():
    text = "other|a||root|5\nc1|a||root|parent\nc1|a|u||x\nc1|only|three\n"
    rows, bad = parse_associations(text, "c1")
    assert [(r.account, r.raw_shares) for r in rows] == [("a", None)]
    assert [b.line_no for b in bad] == [3, 4]
    assert "Fairshare 'x' is not a number" in str(bad[0])


def test_collect_slurm_shares_lands_a_snapshot(tmp_path, monkeypatch):
    from collector.sources.slurm.assoc import collect_associations
    from warehouse.connection import connect

    asked: list[list[str]] = []

    def runner(argv: list[str]) -> str:
        asked.append(argv)
        return FIXTURE.read_text()

    now = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
    landed, bad = collect_associations(Lake.at(tmp_path), "testcluster", runner, now)
    assert (landed, bad) == (9, [])
    assert asked == [sacctmgr_argv("testcluster")]
    # A later snapshot without bob replaces the tree (the report reads the latest snapshot).
    lines = [ln for ln in FIXTURE.read_text().splitlines() if "|bob|" not in ln]
    collect_associations(
        Lake.at(tmp_path), "testcluster", lambda _: "\n".join(lines), now.replace(hour=13)
    )
    con = connect(tmp_path)
    users = con.sql(
        "SELECT user FROM associations WHERE updated_ts = (SELECT max(updated_ts) "
        "FROM associations) AND user IS NOT NULL ORDER BY ALL"
    ).fetchall()
    assert [u for (u,) in users] == ["alice", "carol", "carol", "root", "root"]


@pytest.mark.slow
def test_email_goes_through_the_configured_smtp_server(lake, tmp_path):
    from aiosmtpd.controller import Controller

    from tests.report.test_render import Inbox, free_port

    inbox = Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        result = invoke(
            "report", "weekly", "--lake", str(lake), "--week", "2024-W09", "--out",
            str(tmp_path), "--no-pdf", "--email",
            GPULEDGER_ALERTS_SMTP_HOST="127.0.0.1", GPULEDGER_ALERTS_SMTP_PORT=str(port),
            GPULEDGER_ALERTS_EMAIL_FROM="report@test", GPULEDGER_ALERTS_ADMIN_EMAILS="lead@test",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert inbox.done.wait(10)
    finally:
        controller.stop()
    assert "emailed to lead@test" in result.output
    assert b"report@test" in inbox.messages[0] and b"2024-W09" in inbox.messages[0]


def test_email_to_an_unreachable_server_is_one_line_error(lake, tmp_path):
    from tests.report.test_render import free_port

    result = invoke(
        "report", "weekly", "--lake", str(lake), "--week", "2024-W09", "--out", str(tmp_path),
        "--no-pdf", "--email", "--email-to", "x@test",
        GPULEDGER_ALERTS_SMTP_HOST="127.0.0.1", GPULEDGER_ALERTS_SMTP_PORT=str(free_port()),
    )  # fmt: skip
    one_error(result, 1, "SMTP 127.0.0.1")


def test_a_mail_that_fails_for_one_cluster_leaves_the_next_reports_written(tmp_path):
    # the first cluster's SMTP error ended the run: the next cluster's report was never written
    from tests.marts import rows as r
    from tests.report.test_render import free_port

    jobs = [r.job("a", 0, 3600), r.job("b", 0, 3600) | {"cluster": "zeta"}]
    job_gpus = [r.job_gpu("a", 0, 3600), r.job_gpu("b", 0, 3600) | {"cluster": "zeta"}]
    r.build_lake(tmp_path / "lake", jobs=jobs, job_gpus=job_gpus).close()
    result = invoke(
        "report", "weekly", "--lake", str(tmp_path / "lake"), "--week", "2024-W09",
        "--out", str(tmp_path / "out"), "--no-pdf", "--email", "--email-to", "x@test",
        GPULEDGER_ALERTS_SMTP_HOST="127.0.0.1", GPULEDGER_ALERTS_SMTP_PORT=str(free_port()),
    )  # fmt: skip

    one_error(result, 1, "not emailed: della (SMTP 127.0.0.1", "zeta (SMTP", "are written")
    for cluster in ("della", "zeta"):
        page = tmp_path / "out" / cluster / "2024-W09" / f"fairness-{cluster}-2024-W09.html"
        assert page.is_file()


def test_a_lake_whose_marts_were_not_built_is_told_to_attribute(tmp_path):
    from tests.marts.rows import job, land

    land(tmp_path, "jobs", [job("j1", 0, 3600)])
    result = invoke("report", "weekly", "--lake", str(tmp_path), "--week", "2024-W09")
    one_error(result, 1, "no fairness_weekly mart", "gpuledger attribute")


def _fake(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(0o755)


def test_collect_slurm_shares_command_runs_sacctmgr(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    # The fake checks it was asked for the cluster's associations, then prints the recording.
    _fake(folder, "sacctmgr", f'echo "$@" > {tmp_path}/argv; cat {FIXTURE}')
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    lake = tmp_path / "lake"
    result = invoke("collect", "slurm-shares", "--cluster", "testcluster", "--lake", str(lake))
    assert result.exit_code == 0, result.output
    assert "9 association(s) landed" in result.output
    argv = (tmp_path / "argv").read_text()
    assert "show associations cluster=testcluster" in argv
    assert "format=Cluster,Account,User,ParentName,Fairshare" in argv

    _fake(folder, "sacctmgr", "echo 'sacctmgr: error: Problem talking to the database' >&2; exit 1")
    failed = invoke("collect", "slurm-shares", "--cluster", "testcluster", "--lake", str(lake))
    one_error(failed, 1, "sacctmgr failed (exit 1)", "Problem talking to the database")


def test_a_week_the_data_begin_inside_is_no_complete_week():
    # The probe: data from Wednesday 06:00 of W45 to Saturday of W46 made W45 "the latest
    # complete week with data"; data from Saturday of W40 to Wednesday of W41 chose W40 (48 h)
    # over W41 (60 h). A week the data begin inside is covered only from then.
    from app.report.week import IsoWeek, covered, default_week

    now = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    w45, w46 = IsoWeek(2026, 45), IsoWeek(2026, 46)
    start = w45.start + dt.timedelta(days=2, hours=6)
    end = w46.start + dt.timedelta(days=5, hours=12)
    assert not covered(w45, end, now, start)
    assert covered(w45, end, now, w45.start)
    assert default_week([w45, w46], end, now, start) == w46  # none whole: 132 h against 114
    w47 = IsoWeek(2026, 47)
    assert default_week([w45, w46, w47], w47.start + dt.timedelta(days=1), now, start) == w46


@pytest.mark.parametrize(
    ("begin_h", "end_h", "said"),
    [
        (54, 168, "The data begin Wed 04 Nov 06:00 UTC, inside this week: its figures cover 114"),
        (0, 132, "The data end Sat 07 Nov 12:00 UTC, inside this week: its figures cover 132"),
        (12, 132, "The data begin Mon 02 Nov 12:00 UTC and end Sat 07 Nov 12:00 UTC, inside this "
         "week: its figures cover 120 of its 168 hours, and the queue is as it stood then."),
        (0, 168, None),
    ],
)  # fmt: skip
def test_the_coverage_note_counts_the_hours_between_the_data_begin_and_end(begin_h, end_h, said):
    # beta 2026-W46 in the probe: data from Monday 12:00 to Saturday 12:00 (120 h) were said
    # to cover 132 of its 168 hours (counted from Monday 00:00)
    from app.report.data import _coverage_note
    from app.report.week import IsoWeek

    week = IsoWeek(2026, 45)
    notes = _coverage_note(
        week,
        week.start + dt.timedelta(hours=begin_h) - dt.timedelta(days=7 * (begin_h == 0)),
        week.start + dt.timedelta(hours=end_h) + dt.timedelta(days=7 * (end_h == 168)),
    )
    assert notes == ([] if said is None else [notes[0]]) and (said is None or said in notes[0])
