"""Job-end mail and the AdminComment summary (issue #25) on the real Slurm 22.05.

slurmctld runs MailProg and EpilogSlurmctld as SlurmUser from the test cluster's hooks
(tests/infra/slurm/hooks), which run the shipped deploy/slurm scripts while this module's
gpuledger.env exists: `gpuledger mail` hands each mail to a recording mailer, the epilog stores
the job's summary with sacctmgr. One job is in the lake when it ends (collected while it ran):
its END mail carries its report and its AdminComment the lake's summary. One is not: its mail
goes out with one line saying why, and its AdminComment says it was not in the lake.

Named to run after the other live modules of the folder (file order, one worker): its jobs
end before the soak test starts, and the hooks are idle again when it finishes.
"""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.jobmail.compose import MAIL_WIDTH, NOTE_PREFIX
from app.jobmail.summary import parse_admin_comment
from tests.slurm_live.cluster import CLUSTER, STATE_DIR, SlurmCluster

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]  # with a wait for the cluster lock

REPO = Path(__file__).resolve().parents[2]
HOOKS_ENV = STATE_DIR / "hooks" / "gpuledger.env"
WORK = STATE_DIR / "mailtest"
WAIT_S = 60


@dataclass(frozen=True)
class Site:
    lake: Path
    outbox: Path  # what the recording mailer was given, one file per mail


def _python_for_slurm() -> str:
    """A Python 3 of this one's version that SlurmUser may run (a venv under /root is not)."""
    here = sys.version_info[:2]
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        done = subprocess.run(
            ["runuser", "-u", "slurm", "--", candidate, "-c",
             "import sys; print(sys.version_info[:2])"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode == 0 and done.stdout.strip() == str(here):
            return candidate
    pytest.fail(f"no Python {here[0]}.{here[1]} that the slurm user may run", pytrace=False)


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    path.chmod(mode)


@pytest.fixture(scope="module")
def site(slurm_cluster: SlurmCluster) -> Iterator[Site]:
    slurm_cluster.start()  # every daemon up: earlier live tests stop them on purpose (idempotent)
    slurm_cluster.jobs_dir.mkdir(mode=0o1777, exist_ok=True)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(mode=0o755)
    WORK.chmod(0o755)
    outbox = WORK / "outbox"
    outbox.mkdir()
    outbox.chmod(0o1777)
    lake = WORK / "lake"
    paths = os.pathsep.join(
        [str(REPO), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    )
    _write(
        WORK / "gpuledger",
        f"""
        #!/bin/sh
        PYTHONPATH={paths} exec {_python_for_slurm()} -c \\
            'import sys; from app.cli import main; sys.argv[0] = "gpuledger"; main()' "$@"
        """,
        0o755,
    )
    _write(
        WORK / "mailer",
        f"""
        #!/bin/sh
        out={outbox}/mail.$$
        {{ for a in "$@"; do printf '%s\\n' "$a"; done; echo --; cat; }} > "$out.tmp"
        mv "$out.tmp" "$out"
        """,
        0o755,
    )
    _write(WORK / "gpuledger.toml", f'lake = "{lake}"\n\n[mail]\nmailer = "{WORK / "mailer"}"\n')
    _write(
        HOOKS_ENV,
        f"""
        GPULEDGER_MAILPROG={REPO / "deploy" / "slurm" / "mailprog-gpuledger.sh"}
        GPULEDGER_EPILOG={REPO / "deploy" / "slurm" / "epilog-slurmctld-gpuledger.sh"}
        export GPULEDGER={WORK / "gpuledger"}
        export GPULEDGER_CONFIG={WORK / "gpuledger.toml"}
        export SLURM_CONF={slurm_cluster.conf}
        export GPULEDGER_EPILOG_TRIES=30
        """,
    )
    # the hooks join slurm.conf for this module's jobs only (tests/infra/slurm/slurm.conf.in),
    # read by a slurmctld started again
    extra = slurm_cluster.conf.with_name("slurm.conf.extra")
    hooks = STATE_DIR / "hooks"
    extra.write_text(
        f"MailProg={hooks / 'mailprog'}\nEpilogSlurmctld={hooks / 'epilog-slurmctld'}\n",
        encoding="utf-8",
    )
    slurm_cluster.stop("slurmctld")
    slurm_cluster.start()
    try:
        yield Site(lake=lake, outbox=outbox)
    finally:
        HOOKS_ENV.unlink(missing_ok=True)
        extra.unlink(missing_ok=True)
        slurm_cluster.stop("slurmctld")
        slurm_cluster.start()


def gpuledger(*args: str) -> None:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output


def mail_of(c: SlurmCluster, site: Site, job: str) -> tuple[list[str], str]:
    """(argv, body) of the mail about `job`, once the mailer has it."""
    found: list[tuple[list[str], str]] = []

    def arrived() -> bool:
        for path in site.outbox.glob("mail.*[0-9]"):
            head, _, body = path.read_text(encoding="utf-8").partition("--\n")
            argv = head.splitlines()
            if len(argv) > 1 and f"Job_id={job} " in argv[1]:
                found.append((argv, body))
                return True
        return False

    c.wait_for(f"the mail about job {job}", arrived, WAIT_S)
    return found[0]


def admin_comment(c: SlurmCluster, job: str) -> str:
    text: list[str] = []

    def stored() -> bool:
        out = c.run("sacct", "-n", "-X", "-P", "-j", job, "-o", "AdminComment").strip()
        text[:] = [out]
        return bool(out)

    c.wait_for(f"the AdminComment of job {job}", stored, WAIT_S)
    return text[0]


def test_a_jobs_end_mail_holds_its_report_and_its_admin_comment_the_summary(
    slurm_cluster: SlurmCluster, site: Site
):
    c = slurm_cluster
    job = c.submit("alice", "--job-name=mailed", "--mail-type=END", "--gres=gpu:h100:1")
    c.wait_state(job, "RUNNING")
    # The pipeline has collected the running job (no telemetry: there is no Prometheus here).
    gpuledger("collect", "slurm", "--cluster", CLUSTER, "--lake", str(site.lake))
    # SlurmUser reads the lake as a member of its group (docs/operations/job-end-mail.md).
    slurm_gid = grp.getgrnam("slurm").gr_gid
    for path in (site.lake, *site.lake.rglob("*")):
        os.chown(path, -1, slurm_gid)
    c.release(job)
    c.wait_ended(job, "COMPLETED")

    argv, body = mail_of(c, site, job)
    lines = body.splitlines()

    assert argv[0] == "-s" and argv[2:] == ["alice"]  # as Slurm called MailProg
    assert argv[1].startswith(f"Slurm Job_id={job} Name=mailed Ended, Run time ")
    assert argv[1].endswith(", COMPLETED, ExitCode 0")
    assert "Job Statistics (gpuledger)" in body
    assert f"         Job ID: {job}" in lines
    assert "          State: COMPLETED" in lines  # Slurm's word at the end
    assert "   User/Account: alice/research" in lines
    assert "           GPUs: 1" in lines
    assert "No GPU telemetry was attributed to this job" in body
    assert not [line for line in lines if line.startswith(NOTE_PREFIX)]
    assert max(len(line) for line in lines) <= MAIL_WIDTH

    stored = admin_comment(c, job)
    summary = parse_admin_comment(stored)
    # sacctmgr (the only way to set it once the job has ended) writes quotes as backticks
    assert stored.startswith("{`gpuledger`:1,`busy`:null,") and '"' not in stored
    assert summary is not None
    assert summary["gpuledger"] == 1
    assert summary["busy"] is None and summary["idle_gpu_h"] is None  # no telemetry
    assert summary["diagnosis"] == "unobserved" and summary["finding"] is None


def test_a_job_the_lake_has_not_seen_still_gets_its_mail_with_one_line(
    slurm_cluster: SlurmCluster, site: Site
):
    c = slurm_cluster
    job = c.submit("bob", "--job-name=unseen", "--mail-type=END", wrap="true")
    c.wait_ended(job, "COMPLETED")

    argv, body = mail_of(c, site, job)

    assert argv[1].startswith(f"Slurm Job_id={job} Name=unseen Ended, Run time ")
    assert argv[2:] == ["bob"]
    # (the lake holds this cluster: only its jobs are looked at; the mail wraps the note)
    assert " ".join(body.split()) == (
        f"{NOTE_PREFIX}job '{job}' of cluster '{CLUSTER}' is not in the lake yet"
    )
    summary = parse_admin_comment(admin_comment(c, job))
    assert summary is not None
    assert summary["busy"] is None and summary["note"] == "not in the lake at the end"
