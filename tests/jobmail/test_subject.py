"""Slurm 22.05's mail subjects (src/slurmctld/agent.c `mail_job_info`), read by parse_subject."""

from __future__ import annotations

import pytest

from app.jobmail.subject import SlurmMail, parse_subject


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (
            "Slurm Job_id=123 Name=train Ended, Run time 01:02:03, COMPLETED, ExitCode 0",
            SlurmMail("123", "train", "Ended", "01:02:03", "COMPLETED", "0"),
        ),
        (
            "Slurm Job_id=124 Name=train Failed, Run time 1-00:00:10, TIMEOUT, ExitCode 0",
            SlurmMail("124", "train", "Failed", "1-00:00:10", "TIMEOUT", "0"),
        ),
        (
            "Slurm Job_id=125 Name=big Failed, Run time 00:00:09, OUT_OF_MEMORY, ExitCode 0",
            SlurmMail("125", "big", "Failed", "00:00:09", "OUT_OF_MEMORY", "0"),
        ),
        (  # `Ended` with a failed state: Slurm 22.05 sends END mail only to COMPLETED and
            # CANCELLED jobs (a TIMEOUT gets FAIL mail or none), so no plain job's subject
            # reads so; an array's summary may sum its tasks up so. Read all the same.
            "Slurm Job_id=126 Name=t Ended, Run time 00:01:30, TIMEOUT, ExitCode 0",
            SlurmMail("126", "t", "Ended", "00:01:30", "TIMEOUT", "0"),
        ),
        (  # a job killed by a signal: no exit code
            "Slurm Job_id=127 Name=t Failed, Run time 00:00:05, FAILED",
            SlurmMail("127", "t", "Failed", "00:00:05", "FAILED", None),
        ),
        (
            "Slurm Array Task Job_id=7_3 (10) Name=sweep Ended, Run time 00:00:02, COMPLETED, "
            "ExitCode 0",
            SlurmMail("7_3", "sweep", "Ended", "00:00:02", "COMPLETED", "0"),
        ),
        (
            "Slurm Array Summary Job_id=7_* (7) Name=sweep Ended, Mixed, ExitCode [0-1]",
            SlurmMail("7_*", "sweep", "Ended", None, None, "[0-1]", array_summary=True),
        ),
        (
            "Slurm Job_id=128 Name=my job Ended twice Ended, Run time 00:00:01, CANCELLED",
            SlurmMail("128", "my job Ended twice", "Ended", "00:00:01", "CANCELLED", None),
        ),
        (  # before Slurm 20.02 the subject began with SLURM
            "SLURM Job_id=129 Name=old Ended, Run time 00:00:01, COMPLETED, ExitCode 0",
            SlurmMail("129", "old", "Ended", "00:00:01", "COMPLETED", "0"),
        ),
        (
            "Slurm Job_id=130 Name=x Began, Queued time 00:00:04",
            SlurmMail("130", "x", "Began", "00:00:04"),
        ),
        (
            "Slurm Job_id=131 Name=x Reached 90% of time limit, Run time 00:54:00",
            SlurmMail("131", "x", "Reached 90% of time limit", "00:54:00"),
        ),
    ],
)
def test_subjects_are_read(subject, expected):
    assert parse_subject(subject) == expected


@pytest.mark.parametrize(
    ("subject", "wants"),
    [
        ("Slurm Job_id=1 Name=x Ended, Run time 00:00:01, COMPLETED, ExitCode 0", True),
        ("Slurm Job_id=1 Name=x Failed, Run time 00:00:01, OUT_OF_MEMORY, ExitCode 0", True),
        ("Slurm Job_id=1 Name=x Began, Queued time 00:00:01", False),
        ("Slurm Job_id=1 Name=x Requeued, Run time 00:00:01", False),
        ("Slurm Job_id=1 Name=x Reached time limit, Run time 01:00:00", False),
    ],
)
def test_only_a_jobs_end_wants_the_report(subject, wants):
    mail = parse_subject(subject)

    assert mail is not None and mail.wants_report is wants


@pytest.mark.parametrize(
    "subject", ["", "Hello", "Slurm Job_id=1 Name=x Exploded", "Job_id=1 Name=x Ended"]
)
def test_other_subjects_are_not_slurms(subject):
    assert parse_subject(subject) is None
