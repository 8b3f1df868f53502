"""The body of a job-end mail: Slurm's own body, then the job's report or one line saying why not.

`compose` never raises and never drops Slurm's body: a subject it cannot read, or a mail that
is not a job's end, passes through unchanged; a report that fails (no lake, the job not in it
yet, a crash, a report slower than the time it may take) becomes one line
`gpuledger: no report: <why>`. Every line of what it adds fits an e-mail's 78 columns.

A mail must never carry another job's report. Slurm sends it as the job ends, so the job the
lake holds under its id is this one only if its record can be of the run that just ended: the
subject's name (a heterogeneous job's leader's), a start (a job the lake saw only pending has
not been seen running), not ended long before the mail is handled (`OLD_RECORD`: the
scheduler's ids began again), and a start no later than the subject's run time puts this
run's (within `MAIL_DELAY`), nor earlier for a record that ended before the mail (an earlier
run of a requeued job). A running record that starts earlier is this run's, suspended, or an
earlier run the lake saw before a requeue: its report says so (`run_caveat`). The time the
mail is handled is `lake_report`'s `clock` (the wall clock; figures keep the end of the data).
"""

from __future__ import annotations

import datetime as dt
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.errors import AppError
from app.jobmail.subject import SlurmMail, parse_subject
from warehouse.errors import WarehouseError
from warehouse.lake import Lake

if TYPE_CHECKING:
    from detectors.job_report import JobReport

__all__ = [
    "MAIL_DELAY",
    "MAIL_WIDTH",
    "OLD_RECORD",
    "Clock",
    "Composed",
    "ReportFor",
    "ReportTimedOut",
    "compose",
    "fit_width",
    "lake_report",
    "run_caveat",
    "wall_clock",
]

MAIL_WIDTH = 78  # RFC 5322 §2.1.1: lines SHOULD be no longer than 78 characters
NOTE_PREFIX = "gpuledger: no report: "
# A report's per-GPU line holds 64 columns before the sparkline (app/commands/job.py).
_GPU_LINE_BEFORE_SPARK = 64

# A record that ended more than this before the mail is handled is not the job Slurm mails
# about now, whose end was moments ago: another job of the same id (the scheduler's ids began
# again after a state reset or MaxJobId). A day is far beyond any delay of a mail.
OLD_RECORD = dt.timedelta(days=1)
# How far the record's start may lie from the one the subject's run time gives (the mail
# handled less its run time): slurmctld's mail agent queues a mail, so it is handled some
# moments after the job's end, seldom minutes. Farther, the record is of another run.
MAIL_DELAY = dt.timedelta(minutes=15)

ReportFor = Callable[[SlurmMail], str]
Clock = Callable[[], dt.datetime]


def wall_clock() -> dt.datetime:
    """The time a mail is handled: now, on the wall clock (UTC)."""
    return dt.datetime.now(dt.UTC)


class ReportTimedOut(AppError):
    """The report took longer than the mail may wait."""


@dataclass(frozen=True, slots=True)
class Composed:
    """What to send, why there is no report (None when there is one or none was due), and
    whether a report is still being made in the background (the caller exits without it)."""

    body: str
    note: str | None = None
    still_running: bool = False


def fit_width(text: str, width: int = MAIL_WIDTH) -> str:
    """Wrap every line longer than `width`, keeping its indent (continuations indented 4
    more); shorter lines are left as they are."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        rest = (indent + "    ")[: width // 2]
        out += textwrap.wrap(line, width, subsequent_indent=rest, break_on_hyphens=False)
    return "\n".join(out) + "\n"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, AppError | WarehouseError | LookupError):
        text = str(exc.args[0]) if isinstance(exc, LookupError) and exc.args else str(exc)
    else:
        text = f"the report failed ({type(exc).__name__}: {exc})"
    return " ".join(text.split())  # one line


def _append(body: str, addition: str) -> str:
    if not body.strip():
        return addition
    return body.rstrip("\n") + "\n\n" + addition


def _run(report_for: ReportFor, mail: SlurmMail, timeout_s: float) -> tuple[str | None, bool]:
    """(the report, False); raises what the report raised; (None, True) when it is still
    running after `timeout_s` (it goes on in a daemon thread)."""
    result: list[str] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            result.append(report_for(mail))
        except BaseException as exc:  # handed to the caller, which never lets it through
            failure.append(exc)

    thread = threading.Thread(target=work, name="job-report", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return None, True
    if failure:
        raise failure[0]
    return result[0], False


def compose(
    body: str,
    subject: str,
    report_for: ReportFor,
    *,
    timeout_s: float = 60.0,
    problem: str | None = None,
    width: int = MAIL_WIDTH,
) -> Composed:
    """Slurm's `body` with the report of the job `subject` names appended, if it ended.

    `report_for(mail)` makes the report text (the seam: `lake_report` in use, a stub in
    tests); `problem`, when set, is why no report can be made at all (a configuration that
    is not valid), given in the note instead of trying.
    """
    try:
        mail = parse_subject(subject)
    except Exception:  # never lose the mail over a subject
        mail = None
    if mail is None or not mail.wants_report:
        return Composed(body)

    def without(reason: str, still_running: bool = False) -> Composed:
        # the note whole on one line (slurmctld's log), in the mail wrapped to its width
        note = NOTE_PREFIX + reason
        # (a path longer than the width stays whole on its line: the reader copies it)
        wrapped = textwrap.fill(note, width, break_long_words=False, break_on_hyphens=False)
        return Composed(_append(body, wrapped + "\n"), note, still_running)

    if problem is not None:
        return without(problem)
    if mail.array_summary:
        base = mail.job_id.split("_", 1)[0]
        return without(
            f"this mail sums up every task of array {base}; `gpuledger job {base}_<task>` "
            "reports one task"
        )
    try:
        report, running = _run(report_for, mail, timeout_s)
    except BaseException as exc:
        return without(_reason(exc))
    if running or report is None:
        return without(f"the report took longer than {timeout_s:g} s", still_running=running)
    return Composed(_append(body, fit_width(report, width)))


def _seconds(run_time: str | None) -> float | None:
    from collector.sources.slurm.fields import parse_duration_s

    if run_time is None:
        return None
    try:
        return parse_duration_s(run_time)
    except Exception:  # a subject's odd run time leaves the lake's
        return None


def lake_clusters(lake: Lake) -> list[str]:
    """The cluster folders the lake holds scheduler records of."""
    return sorted(p.name.removeprefix("cluster=") for p in lake.table_dir("jobs").glob("cluster=*"))


def slurm_cluster_in(lake: Lake, cluster: str | None) -> tuple[str | None, bool]:
    """The lake's cluster to look a job of Slurm's `cluster` (SLURM_CLUSTER_NAME) up on, and
    whether the lake holds it: that cluster alone where it does (a job not collected yet is
    none, never another cluster's job of the same id); the lake's one cluster where it names
    it otherwise, or no cluster is given. Raises AppError where the lake holds several
    clusters, none of them `cluster`: which one's job of the id is this job cannot be told
    (by its name alone, another user's `run.sh` went into the mail)."""
    if cluster is None:
        return None, False
    if lake.partition_dir("jobs", cluster, None).is_dir():
        return cluster, True
    held = lake_clusters(lake)
    if len(held) > 1:
        raise AppError(
            f"the lake holds no cluster {cluster!r} but several others ({', '.join(held[:5])}"
            f"{' …' if len(held) > 5 else ''}): collect Slurm under its own cluster name "
            "(gpuledger collect slurm --cluster NAME as SLURM_CLUSTER_NAME gives it)"
        )
    return None, False


def _when(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _utc(ts: object) -> dt.datetime | None:
    """A record's instant as an aware datetime (one without a zone is UTC, as the lake's)."""
    if not isinstance(ts, dt.datetime):
        return None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=dt.UTC)


def not_this_run(
    job: dict[str, Any],
    now: dt.datetime,
    runtime_s: float | None,
    state: str | None,
    where: str = "",
) -> str | None:
    """Why the lake's record `job` is not of the run whose end Slurm mails about `now`
    (`runtime_s` and `state` the subject's), or None where it can be: a record without a start
    while the subject says the job ran (the lake saw it only pending: the figures, none or an
    earlier run's, are not of this run); a record that ended more than OLD_RECORD before the
    mail; a record whose start lies more than MAIL_DELAY from `now` less the run time."""
    job_id = job.get("job_id")
    start, end = _utc(job.get("start_ts")), _utc(job.get("end_ts"))
    if start is None and "start_ts" in job:
        # a run time of 0 with CANCELLED (or none at all) is a job that never started, as the
        # lake holds it: its report says so
        never = runtime_s is None or (runtime_s == 0 and (state or "").startswith("CANCELLED"))
        if never:
            return None
        return f"job {job_id!r}{where} has not been seen running in the lake yet"
    if end is not None and end < now - OLD_RECORD:
        return (
            f"job {job_id!r}{where} in the lake ended {_when(end)}, more than a day before "
            "this mail: another job of the same id (the scheduler's job ids began again)"
        )
    if start is not None and runtime_s is not None:
        began = now - dt.timedelta(seconds=runtime_s)
        # (Slurm's run time leaves out time suspended: a record may start earlier than `began`
        # and be this run's; `run_caveat` says so. It cannot start later.)
        later = start > began + MAIL_DELAY
        ended_before = end is not None and end < now - MAIL_DELAY
        if later or (ended_before and start < began - MAIL_DELAY):
            return (
                f"job {job_id!r}{where} in the lake is of a run that started {_when(start)}"
                + (f" and ended {_when(end)}" if ended_before and end is not None else "")
                + f", not of the run this mail is about (started about {_when(began)}): "
                + ("another job of the same id" if later else "an earlier run of it or another "
                   "job of the same id")
            )  # fmt: skip
    return None


def run_caveat(job: dict[str, Any], now: dt.datetime, runtime_s: float | None) -> str | None:
    """A line for a report whose record (still running in the lake) starts more than
    MAIL_DELAY before the start the subject's run time gives: the job was suspended that long
    (Slurm's run time leaves it out), or it was requeued since the lake saw it, and then its
    figures hold its earlier run too. None where the record's start is this run's."""
    start, end = _utc(job.get("start_ts")), _utc(job.get("end_ts"))
    if start is None or end is not None or runtime_s is None:
        return None
    began = now - dt.timedelta(seconds=runtime_s)
    if start >= began - MAIL_DELAY:
        return None
    hours = (began - start).total_seconds() / 3600
    return (
        f"Note: its record in the lake starts {_when(start)}, {hours:.1f} h before Slurm's "
        "run time puts this run's start: it was suspended that long, or it was requeued "
        "since the lake saw it and the figures below hold its earlier run too."
    )


def named_otherwise(job: dict[str, Any], name: str | None) -> str | None:
    """Why the job found is not the one Slurm named `name` (its job name in the lake differs:
    the same id on another cluster, or the scheduler's ids began again), or None."""
    if name and job.get("job_name") not in (None, name):
        return (
            f"job {job['job_id']!r} in the lake is named {job.get('job_name')!r}, not "
            f"{name!r} as Slurm says: another job of the same id"
        )
    return None


def _leaders(reports: list[JobReport]) -> list[JobReport]:
    """The reports whose job name Slurm's subject gives: a heterogeneous job's mail names its
    leader's (component 0), whose other components may be named otherwise; all of them where
    the lake holds no leader (none can be told to be this job's then), as any other job's."""
    if len(reports) < 2:
        return reports
    leader = [r for r in reports if str(r.job.get("job_id", "")).endswith("+0")]
    return leader or reports


def lake_report(
    lake: Lake,
    cluster: str | None = None,
    width: int = MAIL_WIDTH,
    clock: Clock = wall_clock,
) -> ReportFor:
    """`report_for` from the lake: what `gpuledger job` says, `width` columns wide.

    The job's final state and run time come from the mail's subject (Slurm's word at the
    end), since the lake may still hold the job as running. The job is looked up on `cluster`
    (Slurm's SLURM_CLUSTER_NAME) alone where the lake holds that cluster: a job it has not
    collected yet is no report, never another cluster's job of the same id. Only a lake that
    names the cluster otherwise (or a mail without one) is searched on any cluster. The job
    found must carry the subject's job name where the lake knows it (a heterogeneous job's
    leader), and its record must be of the run that ended as the mail is handled, at `clock()`
    (`not_this_run`).
    """

    def report_for(mail: SlurmMail) -> str:
        from app.commands.job import render_text
        from detectors.job_report import UnknownJob, load_job_report
        from warehouse.one_job import job_engine

        if not lake.exists():
            raise AppError(f"no lake at {str(lake)!r}")

        # Slurm's word at the end: the lake may still hold the job as running
        final: dict[str, Any] = {}
        if mail.state:
            final["state"] = mail.state
        runtime = _seconds(mail.run_time)
        if runtime is not None:
            final["runtime_s"] = runtime

        def load_one(job_id: str, on_cluster: str | None) -> JobReport:
            # the job's cluster and days, as `gpuledger job` reads them (the whole lake took
            # seconds on a week of 1,024 GPUs, against [mail] report_timeout_s)
            with job_engine(lake.root, job_id, on_cluster) as con:
                return load_job_report(con, job_id, on_cluster, final=final)

        def load(on_cluster: str | None) -> list[JobReport]:
            try:
                return [load_one(mail.job_id, on_cluster)]
            except UnknownJob as unknown:
                if not unknown.components:
                    raise
                # a heterogeneous job (Slurm's subject names its number; the lake holds its
                # components 1014+0, 1014+1 …): each component's report, in order
                return [load_one(part, on_cluster) for part in unknown.components]

        on_cluster, known = slurm_cluster_in(lake, cluster)
        try:
            reports = load(on_cluster)
        except UnknownJob:
            where = f" of cluster {cluster!r}" if known else ""
            raise AppError(f"job {mail.job_id!r}{where} is not in the lake yet") from None
        for report in _leaders(reports):
            # (the same id on another cluster, or after the scheduler's ids began again with
            # the new job not collected yet, is another person's job)
            otherwise = named_otherwise(report.job, mail.name)
            if otherwise is not None:
                raise AppError(otherwise)
        now = clock()  # when the mail is handled: moments after the job's end
        where = f" of cluster {cluster!r}" if known else ""
        for report in reports:
            otherwise = not_this_run(report.job, now, runtime, mail.state, where)
            if otherwise is not None:
                raise AppError(otherwise)
        detected = bool(lake.table_files("findings"))
        spark = max(8, width - _GPU_LINE_BEFORE_SPARK)
        texts = []
        for report in reports:
            caveat = run_caveat(report.job, now, runtime)
            text = render_text(report, detected=detected, width=width, spark_width=spark)
            texts.append(text if caveat is None else fit_width(caveat, width) + text)
        return "\n".join(texts)

    return report_for
