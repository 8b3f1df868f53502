"""`gpuledger mail -s SUBJECT USER…`: Slurm's MailProg that appends the job's report at its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.errors import AppError, reports_errors

if TYPE_CHECKING:
    from app.jobmail.compose import Clock
    from app.jobmail.settings import MailConfig

__all__ = ["command", "mail_command", "send"]

MAILER_TIMEOUT_S = 50  # what is left of Slurm's 120 s for MailProg after a slow report
# Exit status when the mailer was run and failed (EX_TEMPFAIL): the MailProg wrapper then does
# not send the mail a second time. Any other failure exits 1 and the wrapper sends it.
MAILER_FAILED = 75


def send(mailer: str, subject: str, recipients: tuple[str, ...], body: str) -> None:
    """Hand the mail to the site's mailer as Slurm would: `mailer -s SUBJECT USER…`, body on
    stdin. Raises AppError (one line) when the mailer is missing or fails."""
    argv = [mailer, "-s", subject, *recipients]
    try:
        done = subprocess.run(
            argv,
            input=body,
            text=True,
            capture_output=True,
            timeout=MAILER_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise AppError(f"the mailer {mailer!r} does not exist (set [mail] mailer)") from None
    except PermissionError:
        raise AppError(f"the mailer {mailer!r} is not executable") from None
    except subprocess.TimeoutExpired:
        raise AppError(f"the mailer {mailer!r} did not finish in {MAILER_TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        raise AppError(f"the mailer {mailer!r} exited {done.returncode}: {said or 'no output'}")


def _environment_mailer() -> MailConfig:
    """[mail] mailer from the environment alone (GPULEDGER_MAIL_MAILER, as documented), else
    its default: where the configuration's mailer cannot be read (a file that is not TOML, a
    mailer that is not valid). The empty file os.devnull stands in for the configuration."""
    from app.config import ConfigError, load_section
    from app.jobmail.settings import MailConfig

    try:
        return load_section(MailConfig, Path(os.devnull), keys=("mailer",))
    except ConfigError:
        return MailConfig()


def mail_command(clock: Clock | None = None) -> click.Command:
    """The `mail` command, handling each mail at `clock()` (default: the wall clock): the time
    that says whether the job the lake holds can be the one whose end Slurm mails about now
    (the seam for tests of lakes made at other times)."""

    @click.command("mail")
    @click.option("-s", "subject", required=True, help="The subject, as Slurm writes it.")
    @click.argument("recipients", nargs=-1, required=True)
    @click.option(
        "--lake",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="GPULEDGER_LAKE",
        default=None,
        help="Lake root folder (default: $GPULEDGER_LAKE, else the configuration's `lake`).",
    )
    @click.option(
        "--cluster",
        envvar="SLURM_CLUSTER_NAME",
        default=None,
        help="The job's cluster (default: $SLURM_CLUSTER_NAME, which Slurm sets for MailProg).",
    )
    @reports_errors
    def command(
        subject: str, recipients: tuple[str, ...], lake: Path | None, cluster: str | None
    ) -> None:
        """Slurm's MailProg: send the mail, with the job's report at its end.

        \b
        Slurm runs MailProg as `MailProg -s SUBJECT USER`. For a job's end (the
        subject says Ended or Failed: END or FAIL mail) this appends what
        `gpuledger job` says about the job, 78 columns wide, and hands the mail to
        the site's mailer ([mail] mailer, called the same way, the body on stdin).
        Any other mail goes out unchanged. When the report cannot be made (no
        lake, the job not in it yet, the lake's job of its id another job or an
        earlier run, an error, slower than [mail] report_timeout_s) the mail
        still goes out, with one line saying why. Exit status: 0 sent, 75 the
        mailer failed (its error on stderr), 2 a usage error (no -s or no USER),
        1 anything else.
        Set it up with deploy/slurm/mailprog-gpuledger.sh (MailProg= in slurm.conf).
        Example (what Slurm runs):
          S='Slurm Job_id=12 Name=x Ended, Run time 00:01:02, COMPLETED, ExitCode 0'
          gpuledger mail -s "$S" alice
        """
        _deliver(subject, recipients, lake, cluster, clock)

    return command


command = mail_command()


def _deliver(
    subject: str,
    recipients: tuple[str, ...],
    lake: Path | None,
    cluster: str | None,
    clock: Clock | None,
) -> None:
    """What `gpuledger mail` does: the mail with its report (or the note why none) to the
    site's mailer; `clock()` is when it is handled (the job-identity check's time; None: the
    wall clock)."""
    from app.config import ConfigError, LakeConfig, load_section
    from app.jobmail.compose import compose, lake_report, wall_clock
    from app.jobmail.settings import MailConfig
    from warehouse.lake import Lake

    body = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    problem = None
    # the two sections it reads, alone: the others would load the detectors (~0.8 s); each
    # apart, so a bad [lake] keeps a good [mail] mailer (the mail went to /usr/bin/mail, and
    # was lost where the site had none)
    try:
        settings = load_section(MailConfig)
    except ConfigError as exc:  # the mail still goes out: its mailer if that is valid alone
        try:
            settings = load_section(MailConfig, keys=("mailer",))
        except ConfigError:
            settings = _environment_mailer()
        problem = f"the configuration is not valid: {exc}"
    try:
        root = lake if lake is not None else load_section(LakeConfig).root
    except ConfigError as exc:
        root = Path("lake")
        problem = problem or f"the configuration is not valid: {exc}"
    composed = compose(
        body,
        subject,
        lake_report(Lake.at(root), cluster, clock=clock or wall_clock),
        timeout_s=settings.report_timeout_s,
        problem=problem,
    )
    if composed.note is not None:
        click.echo(composed.note, err=True)  # slurmctld logs MailProg's output
    elif problem is not None:  # a mail that wants no report (Began, …) carries no note
        click.echo(f"gpuledger: {problem}; the mail goes out through {settings.mailer!r}", err=True)
    try:
        send(settings.mailer, subject, recipients, composed.body)
    except AppError as exc:
        click.echo(f"Error: {exc}", err=True)
        if composed.still_running:  # a report stuck in the lake must not hold the exit
            sys.stderr.flush()
            os._exit(MAILER_FAILED)
        sys.exit(MAILER_FAILED)
    if composed.still_running:  # a report stuck in the lake must not hold the exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
