"""Read Slurm's mail subject: which job, which event, and how it ended.

Slurm (src/slurmctld/agent.c, `mail_job_info`) calls MailProg as `MailProg -s SUBJECT USER`
with an empty body; the subject is the only description of the event:

    Slurm Job_id=123 Name=train Ended, Run time 01:02:03, COMPLETED, ExitCode 0
    Slurm Job_id=124 Name=train Failed, Run time 00:10:00, TIMEOUT, ExitCode 0
    Slurm Job_id=125 Name=train Failed, Run time 00:00:09, OUT_OF_MEMORY, ExitCode 0
    Slurm Array Task Job_id=7_3 (10) Name=sweep Ended, Run time 00:00:02, COMPLETED, ExitCode 0
    Slurm Array Summary Job_id=7_* (7) Name=sweep Ended, Mixed, ExitCode [0-1]
    Slurm Job_id=126 Name=train Began, Queued time 00:00:01

Slurm 22.05 (src/slurmctld/job_mgr.c, `job_completion_logger`) sends END mail (`Ended`) only to
a job that ended COMPLETED or CANCELLED; one that ends in TIMEOUT, OUT_OF_MEMORY, NODE_FAIL,
FAILED or PREEMPTED gets FAIL mail (`Failed`) only if it asked for it (--mail-type=FAIL or ALL),
and never END mail. `Ended` with such a state is an array's summary (its tasks' states summed
up), never a plain job's subject there; from Slurm 23.11 END mail goes to a job in any end
state, so it is a plain job's subject too, and is read all the same. A NODE_FAIL `Failed` mail
goes out before Slurm requeues the job (its default, JobRequeue=1). A job name may hold spaces
(and even an event word): the subject is read from its end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["REPORT_EVENTS", "SlurmMail", "parse_subject"]

# The events whose mail gets the job's report: a run of the job has ended, COMPLETED or
# CANCELLED (END mail: `Ended`) or otherwise (FAIL mail: `Failed`, for TIMEOUT, OUT_OF_MEMORY,
# NODE_FAIL, FAILED, PREEMPTED). A `Failed` job may run again: Slurm requeues a batch job after
# a NODE_FAIL (unless --no-requeue or JobRequeue=0), which the report's advice says.
REPORT_EVENTS = frozenset({"Ended", "Failed"})
_EVENTS = (
    r"Began|Ended|Failed|Requeued|StageOut/Teardown|Invalid dependency"
    r"|Reached time limit|Reached \d+% of time limit"
)
_SUBJECT = re.compile(
    r"^(?:Slurm|SLURM) (?P<kind>Array Task |Array Summary )?Job_id=(?P<job>\S+)"
    r"(?: \((?P<raw>\d+)\))?"
    rf" Name=(?P<name>.*) (?P<event>{_EVENTS})"
    r"(?:, (?:Queued|Run) time (?P<time>[0-9:-]+))?"
    r"(?:, (?P<state>[A-Z_]+|Mixed)(?:, (?:ExitCode|MaxExitCode|MaxSignal) (?P<exit>\S+))?)?"
    r"(?P<rest>(?:, .*)?)$",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class SlurmMail:
    """One Slurm mail subject, read.

    `job_id` is the id the lake uses (`123`, array tasks `7_3`); an array's summary mail
    (`7_*`) covers many tasks and has `array_summary` set. `run_time` is Slurm's text
    (`1-02:03:04`), `state` the job's final state (`COMPLETED`, `TIMEOUT`, …) and `exit_code`
    its exit code as Slurm wrote it (`0`, `[0-1]` for an array), where the subject has them.
    """

    job_id: str
    name: str
    event: str
    run_time: str | None = None
    state: str | None = None
    exit_code: str | None = None
    array_summary: bool = False

    @property
    def wants_report(self) -> bool:
        """Whether this is a job-end mail (END or FAIL: `Ended`, `Failed`) that gets the
        report."""
        return self.event in REPORT_EVENTS


def parse_subject(subject: str) -> SlurmMail | None:
    """The job and event of a Slurm mail subject; None for any other subject."""
    match = _SUBJECT.match(subject.strip())
    if match is None:
        return None
    state = match.group("state")
    return SlurmMail(
        job_id=match.group("job"),
        name=match.group("name"),
        event=match.group("event"),
        run_time=match.group("time"),
        state=None if state in (None, "Mixed") else state,
        exit_code=match.group("exit"),
        array_summary=match.group("kind") == "Array Summary ",
    )
