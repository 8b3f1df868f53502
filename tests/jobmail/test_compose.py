"""compose(): Slurm's body passes through, a job's end gets its report, a failure one line."""

from __future__ import annotations

import time

import pytest

from app.jobmail.compose import MAIL_WIDTH, NOTE_PREFIX, compose, fit_width
from app.jobmail.subject import SlurmMail
from warehouse.errors import EmptyWarehouse

END = "Slurm Job_id=42 Name=train Ended, Run time 00:10:00, COMPLETED, ExitCode 0"
FAIL = "Slurm Job_id=43 Name=train Failed, Run time 00:00:09, OUT_OF_MEMORY, ExitCode 0"


def report(mail: SlurmMail) -> str:
    return f"Job {mail.job_id} ended {mail.state} after {mail.run_time}\n"


def crash(mail: SlurmMail) -> str:
    raise ZeroDivisionError("division by zero")


def notes(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith("gpuledger:")]


@pytest.mark.parametrize(
    "subject",
    [
        "Slurm Job_id=42 Name=train Began, Queued time 00:00:01",
        "Slurm Job_id=42 Name=train Requeued, Run time 00:00:10",
        "Slurm Job_id=42 Name=train Reached 50% of time limit, Run time 00:30:00",
        "Weekly digest",
    ],
)
def test_other_mail_passes_through_unchanged(subject):
    body = "Slurm's own words\n  indented, and a line far longer than seventy-eight columns " * 2

    composed = compose(body, subject, crash)

    assert composed.body == body
    assert composed.note is None


def test_a_jobs_end_gets_its_report_after_slurms_body():
    assert compose("", END, report).body == "Job 42 ended COMPLETED after 00:10:00\n"
    composed = compose("Slurm says hi\n", FAIL, report)

    assert composed.body == "Slurm says hi\n\nJob 43 ended OUT_OF_MEMORY after 00:00:09\n"
    assert composed.note is None


@pytest.mark.parametrize(
    ("report_for", "why"),
    [
        (crash, "the report failed (ZeroDivisionError: division by zero)"),
        (
            lambda mail: (_ for _ in ()).throw(EmptyWarehouse(__import__("pathlib").Path("/x"))),
            "The lake at '/x' has no data for any table;",
        ),
        (lambda mail: (_ for _ in ()).throw(LookupError("No job '42' in the lake")), "No job"),
    ],
)
def test_a_failed_report_leaves_the_mail_and_one_note(report_for, why):
    composed = compose("Slurm's body\n", END, report_for)

    # the note whole on one line (for slurmctld's log: nothing cut), in the mail wrapped to
    # its width with every word
    assert composed.note is not None and "\n" not in composed.note
    assert composed.note.startswith(NOTE_PREFIX) and why in composed.note
    head, blank, *wrapped = composed.body.splitlines()
    assert (head, blank) == ("Slurm's body", "")
    assert " ".join(wrapped).split() == composed.note.split()
    assert all(len(line) <= MAIL_WIDTH or " " not in line for line in wrapped)


def test_a_slow_report_is_given_up():
    def slow(mail: SlurmMail) -> str:
        time.sleep(2)
        return "late"

    started = time.monotonic()
    composed = compose("", END, slow, timeout_s=0.2)

    assert time.monotonic() - started < 1.5
    assert notes(composed.body) == [f"{NOTE_PREFIX}the report took longer than 0.2 s"]
    assert composed.still_running


def test_a_configuration_problem_and_an_array_summary_say_why():
    problem = compose("", END, report, problem="the configuration is not valid: bad key")
    summary = compose(
        "", "Slurm Array Summary Job_id=7_* (7) Name=s Ended, Mixed, ExitCode [0-1]", report
    )

    assert notes(problem.body) == [f"{NOTE_PREFIX}the configuration is not valid: bad key"]
    [line] = notes(summary.body)
    assert "array 7" in line and len(line) <= MAIL_WIDTH


def test_fit_width_wraps_long_lines_keeping_their_indent():
    text = "short\n" + "  " + " ".join(["word"] * 40) + "\n" + "=" * 100 + "\n"

    out = fit_width(text)
    lines = out.splitlines()

    assert lines[0] == "short"
    assert max(len(line) for line in lines) <= MAIL_WIDTH
    assert all(line.startswith("  ") for line in lines[1:-2])
    assert " ".join(" ".join(lines[1:-2]).split()) == " ".join(["word"] * 40)
    assert "".join(line.strip() for line in lines[-2:]) == "=" * 100
