"""`gpuledger mail` as Slurm's MailProg on a hand-made lake, with a mailer that records what it
was given (argv and stdin), as the site's mailer would receive it."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from app.commands.mail import mail_command
from app.jobmail.compose import MAIL_WIDTH, NOTE_PREFIX
from app.jobmail.summary import SUMMARY_KEYS, parse_admin_comment
from tests.marts import rows as r

H = 3600.0
REPO = Path(__file__).resolve().parents[2]
MAILPROG = REPO / "deploy" / "slurm" / "mailprog-gpuledger.sh"
END = "Slurm Job_id=j1 Name=train Ended, Run time 01:00:00, COMPLETED, ExitCode 0"
TIMEOUT = "Slurm Job_id=j1 Name=train Failed, Run time 08:00:30, TIMEOUT, ExitCode 0"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    """j1: 2 GPUs for 1 h, GPU 0 busy 0.8, GPU 1 never active, one warn finding."""
    root = tmp_path_factory.mktemp("lake")
    times = range(0, int(H), 30)
    r.land(
        root,
        "findings",
        [
            {
                "cluster": r.CLUSTER,
                "finding_id": "f-1",
                "detector": "partial_idle",
                "severity": "warn",
                "subject_kind": "job",
                "subject_id": "j1",
                "job_id": "j1",
                "detected_ts": r.at(H),
                "gpu_h_at_stake": 1.0,
                "message": 'GPU 1 of 2 "never" active',
            }
        ],
    )
    r.build_lake(
        root,
        samples=r.samples(times, gpu_index=0, engine_active=0.8, sm_active=0.8)
        + r.samples(times, gpu_index=1, engine_active=0.0, sm_active=0.0),
        jobs=[r.job("j1", 0, H, gpus=2, cpus=16, cpu_time_s=2 * H, time_limit_s=int(8 * H))],
        job_gpus=[r.job_gpu("j1", 0, H, gpu_index=i) for i in (0, 1)],
    )
    return root


@pytest.fixture
def mailer(tmp_path) -> Path:
    """A mailer that writes its arguments (one a line) and then its stdin to mailer.out."""
    script = tmp_path / "mailer"
    script.write_text(
        "#!/bin/sh\n"
        f'out="{tmp_path}/mailer.out"\n'
        'for a in "$@"; do printf "%s\\n" "$a"; done > "$out"\n'
        'echo "--" >> "$out"\n'
        'cat >> "$out"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def sent(mailer: Path) -> tuple[list[str], str]:
    head, _, body = (mailer.parent / "mailer.out").read_text(encoding="utf-8").partition("--\n")
    return head.splitlines(), body


def mail(mailer: Path, *args: str, body: str = "", at: float = H + 60, **env: str) -> Result:
    """`gpuledger mail ARGS` handled `at` seconds after T0 (the lakes' time; default a minute
    after j1's end): the time its job-identity check takes as now."""
    clean = {k: None for k in os.environ if k.startswith(("GPULEDGER_", "SLURM_"))}
    runner = CliRunner(env={**clean, "GPULEDGER_MAIL_MAILER": str(mailer), **env})
    return runner.invoke(mail_command(clock=lambda: r.at(at)), list(args), input=body)


def test_a_jobs_end_mail_carries_its_report(lake, mailer):
    result = mail(mailer, "-s", END, "alice", "--lake", str(lake))
    argv, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert argv == ["-s", END, "alice"]  # as Slurm called MailProg
    assert "Job Statistics (gpuledger)" in body
    assert "Job ID: j1" in body and "State: COMPLETED" in body
    assert "GPU-hours: 2.00 allocated, 1.00 active, 1.00 idle, 0.80 effective" in body
    assert "[warn] partial_idle" in body
    assert max(len(line) for line in body.splitlines()) <= MAIL_WIDTH
    assert "=" * MAIL_WIDTH in body.splitlines()


def test_the_subject_gives_the_final_state_and_run_time(lake, mailer):
    # (j1's record started at 0, and Slurm says it ran 08:00:30 to its end)
    result = mail(mailer, "-s", TIMEOUT, "alice", "bob", "--lake", str(lake), at=8 * H + 90)
    argv, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert argv == ["-s", TIMEOUT, "alice", "bob"]
    assert "State: TIMEOUT" in body
    assert "Run Time: 08:00:30" in body


def test_cpu_use_is_of_the_run_time_the_lake_holds_not_slurms_final_one(tmp_path, mailer):
    """The lake holds 8 h of a job Slurm ran for 20 h: its CPU time is of those 8 h. Divided
    by the 20 h, its 60 % read 24 %, and it was told to ask for fewer cores."""
    times = range(0, int(8 * H), 60)
    r.build_lake(
        tmp_path / "lake",
        samples=r.samples(times, job_id="j3", interval_s=60.0, engine_active=0.9, sm_active=0.9),
        jobs=[
            r.job(
                "j3",
                0,
                None,
                state="RUNNING",
                cpus=12,
                cpu_time_s=0.6 * 12 * 8 * H,
                time_limit_s=int(27 * H),
                job_name="train",
            )
        ],
        job_gpus=[r.job_gpu("j3", 0, None)],
    )
    subject = "Slurm Job_id=j3 Name=train Ended, Run time 20:00:00, COMPLETED, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(tmp_path / "lake"), at=20 * H)
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "Run Time: 20:00:00" in body
    assert "Collected: 08:00:00 so far (the figures below cover that part)" in body
    assert "60%]" in next(line for line in body.splitlines() if "CPU util" in line)
    assert "fewer CPU cores" not in body


def test_a_heterogeneous_jobs_mail_carries_each_components_report(tmp_path, mailer):
    """Slurm's subject names a heterogeneous job by its number; the lake holds its
    components: the mail said "no report: job '7' is not in the lake yet", for ever."""
    r.build_lake(
        tmp_path / "lake",
        jobs=[r.job(f"7+{i}", 0, H, job_name="het") for i in (0, 1)],
        job_gpus=[r.job_gpu(f"7+{i}", 0, H, gpu_index=i) for i in (0, 1)],
    )
    subject = "Slurm Job_id=7 Name=het Ended, Run time 01:00:00, COMPLETED, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(tmp_path / "lake"))
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "no report" not in body
    ids = [line.split(":", 1)[1].strip() for line in body.splitlines() if "Job ID:" in line]
    assert ids == ["7+0", "7+1"]


def test_the_advice_follows_the_final_state_the_lake_does_not_hold_yet(tmp_path, mailer):
    """At its end the lake still holds the job as running: the mail showed Slurm's TIMEOUT and
    the advice of a running job ("nothing to change"), where `gpuledger job` tells a job that
    was still working at its limit to ask for more time."""
    times = range(0, int(2 * H), 30)
    r.build_lake(
        tmp_path / "lake",
        samples=r.samples(times, job_id="j2", engine_active=0.9, sm_active=0.9),
        jobs=[r.job("j2", 0, None, state="RUNNING", time_limit_s=int(2 * H), job_name="train")],
        job_gpus=[r.job_gpu("j2", 0, None)],
    )
    subject = "Slurm Job_id=j2 Name=train Failed, Run time 02:00:00, TIMEOUT, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(tmp_path / "lake"), at=2 * H)
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "State: TIMEOUT" in body and "Run Time: 02:00:00" in body
    assert "Ask for more time" in body and "--time=" in body


def test_other_mail_goes_out_unchanged(lake, mailer):
    subject = "Slurm Job_id=j1 Name=train Began, Queued time 00:00:03"
    result = mail(mailer, "-s", subject, "alice", "--lake", str(lake), body="as it came\n")

    assert result.exit_code == 0, result.output
    assert sent(mailer) == (["-s", subject, "alice"], "as it came\n")


@pytest.mark.parametrize(
    ("job", "lake_path", "why"),
    [
        ("j1", "missing", "no lake at '/"),
        ("no-such-job", None, "job 'no-such-job' is not in the lake"),
    ],
)
def test_without_a_report_the_mail_still_goes_out_with_one_line(
    lake, mailer, tmp_path, job, lake_path, why
):
    subject = END.replace("Job_id=j1", f"Job_id={job}")
    root = tmp_path / lake_path if lake_path else lake
    result = mail(mailer, "-s", subject, "alice", "--lake", str(root), body="Slurm's body\n")
    _, body = sent(mailer)
    lines = body.splitlines()

    assert result.exit_code == 0, result.output
    assert lines[:2] == ["Slurm's body", ""]
    # (lines fit the mail's width, but for one word longer than it: a path stays whole)
    assert lines[2].startswith(NOTE_PREFIX)
    assert all(len(line) <= MAIL_WIDTH or " " not in line for line in lines)
    note = " ".join(" ".join(lines[2:]).split())  # (wrapped in the mail)
    assert why in note
    assert note in result.output  # also on stderr, whole on one line, for slurmctld's log


def test_an_invalid_configuration_still_sends_the_mail(lake, mailer, tmp_path):
    config = tmp_path / "gpuledger.toml"
    config.write_text(f'[mail]\nmailer = "{mailer}"\nreport_timeout_s = -1\n', encoding="utf-8")
    result = mail(mailer, "-s", END, "alice", GPULEDGER_CONFIG=str(config))
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert body.startswith(NOTE_PREFIX + "the configuration is not valid")
    # the reason itself, which the mail wraps and slurmctld's log shows whole
    assert "mail.report_timeout_s" in body and "mail.report_timeout_s" in result.output


@pytest.mark.parametrize(
    "other",
    ['[lake]\nrooot = "/x"\n', "report_timeout_s = 1e12\n"],
    ids=["bad-lake-section", "bad-mail-key"],
)
def test_the_sites_mailer_sends_whatever_else_the_configuration_gets_wrong(mailer, tmp_path, other):
    # a typo in [lake] sent the mail to /usr/bin/mail (none there: lost) instead of [mail] mailer
    config = tmp_path / "gpuledger.toml"
    config.write_text(f'[mail]\nmailer = "{mailer}"\n' + other, encoding="utf-8")
    clean = {k: None for k in os.environ if k.startswith(("GPULEDGER_", "SLURM_"))}
    runner = CliRunner(env={**clean, "GPULEDGER_CONFIG": str(config)})
    result = runner.invoke(cli, ["mail", "-s", END, "alice"], input="")
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert body.startswith(NOTE_PREFIX + "the configuration is not valid")


def gpuledger(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPULEDGER_", "SLURM_"))}
    return subprocess.run(
        args, input=stdin, text=True, capture_output=True, env={**base, **env}, check=False
    )


def test_a_failing_mailer_exits_75_with_one_line(lake, tmp_path):
    bin_dir = Path(sys.executable).parent
    done = gpuledger(
        str(bin_dir / "gpuledger"), "mail", "-s", END, "alice", "--lake", str(lake),
        env={"GPULEDGER_MAIL_MAILER": str(tmp_path / "no-mailer")},
    )  # fmt: skip

    assert done.returncode == 75, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"Error: the mailer '{tmp_path / 'no-mailer'}' does not exist (set [mail] mailer)"
    )


def test_the_mailprog_wrapper_sends_the_mail_when_gpuledger_cannot_run(mailer, tmp_path):
    subject = END
    done = gpuledger(
        "bash", str(MAILPROG), "-s", subject, "alice",
        env={"GPULEDGER": str(tmp_path / "not-installed"), "GPULEDGER_MAIL_MAILER": str(mailer)},
    )  # fmt: skip
    argv, body = sent(mailer)

    assert done.returncode == 0, done.stderr
    assert argv == ["-s", subject, "alice"]
    assert body == f"{NOTE_PREFIX}gpuledger mail could not run (exit 127)\n"


def test_the_mailprog_wrapper_runs_gpuledger_mail_on_the_wall_clock(lake, mailer, tmp_path):
    """As Slurm runs it: the job ended moments ago on the wall clock, so the lake's job that
    ended then is this one, and the lake's j1 of 2024 is another job of the same id."""
    ended = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=30)
    began = ended - dt.timedelta(hours=1)
    now_lake = tmp_path / "now"
    times = {"submit_ts": began, "start_ts": began, "end_ts": ended, "updated_ts": ended}
    r.build_lake(now_lake, jobs=[r.job("j1", 0, H, job_name="train") | times])

    def wrapper(root: Path) -> str:
        done = gpuledger(
            "bash", str(MAILPROG), "-s", END, "alice",
            env={
                "GPULEDGER": str(Path(sys.executable).parent / "gpuledger"),
                "GPULEDGER_MAIL_MAILER": str(mailer),
                "GPULEDGER_LAKE": str(root),
            },
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return " ".join(sent(mailer)[1].split())

    assert "Job ID: j1" in wrapper(now_lake)
    old = wrapper(lake)
    assert "Job ID" not in old
    assert "in the lake ended 2024-03-01 01:00 UTC, more than a day before this mail" in old


def test_the_summary_for_admin_comment_survives_sacctmgr(lake):
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    result = runner.invoke(cli, ["job", "j1", "--format", "summary", "--lake", str(lake)])
    line = result.output
    summary = json.loads(line)

    assert result.exit_code == 0, result.output
    assert line.count("\n") == 1
    assert tuple(summary) == SUMMARY_KEYS
    assert summary["busy"] == pytest.approx(0.4, abs=1e-3)  # 0.8 and 0 over two GPUs
    assert summary["idle_gpu_h"] == pytest.approx(1.0, abs=1e-3)  # GPU 1, for 1 h
    assert summary["finding"] == "partial_idle: GPU 1 of 2 never active"  # no quotes left
    assert not set("'`|") & set(line)
    # what Slurm 22.05's sacctmgr stores: quotes as backticks, all lowercase
    stored = line.strip().replace('"', "`")
    assert parse_admin_comment(stored) == summary  # Slurm 23.02 on
    lowered = {**summary, "finding": summary["finding"].lower()}
    assert parse_admin_comment(stored.lower()) == lowered  # Slurm 22.05
    assert parse_admin_comment("") is None and parse_admin_comment("hold for maint") is None


def test_the_summary_of_a_job_no_sample_saw_has_no_idle_figure(tmp_path):
    # no telemetry: busy and idle are unknown (idle was 0.0, and the AdminComment said so)
    r.build_lake(tmp_path, jobs=[r.job("nt", 0, H, gpus=2)])
    result = CliRunner().invoke(cli, ["job", "nt", "--format", "summary", "--lake", str(tmp_path)])

    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["busy"] is None and summary["idle_gpu_h"] is None


def test_job_shows_the_admin_comment_summary_of_an_old_job(lake, tmp_path):
    # A stand-in sacct on PATH prints what Slurm 22.05's sacctmgr stored at the job's end.
    stored = (
        "{`gpuledger`:1,`busy`:0.123,`idle_gpu_h`:3.5,`diagnosis`:`idle`,"
        "`finding`:`idle_job: 3 of 4 gpus | idle`}"
    )
    sacct = tmp_path / "sacct"
    sacct.write_text(
        f"#!/bin/sh\necho \"$@\" > {tmp_path}/argv\necho '{stored}'\n", encoding="utf-8"
    )
    sacct.chmod(0o755)
    env = {k: None for k in os.environ if k.startswith("GPULEDGER_")}
    runner = CliRunner(env={**env, "PATH": f"{tmp_path}:{os.environ['PATH']}"})

    text = runner.invoke(cli, ["job", "j1", "--admin-comment", "--lake", str(lake)])
    body = json.loads(
        runner.invoke(
            cli, ["job", "j1", "--admin-comment", "--format", "json", "--lake", str(lake)]
        ).output
    )

    assert text.exit_code == 0, text.output
    assert "At the Job's End (AdminComment)" in text.output
    assert "  GPU busy 12%, 3.50 GPU-h idle; bottleneck: idle" in text.output
    assert "  Main finding: idle_job: 3 of 4 gpus | idle" in text.output
    # a lake of one cluster: the local cluster's job (the lake may name it otherwise)
    assert "-X --format=AdminComment --jobs=j1" in (tmp_path / "argv").read_text()
    assert body["admin_comment"]["idle_gpu_h"] == 3.5
    # on the job's own cluster where the lake holds several: sacct without one asks the local
    # cluster, whose job of the same id is another (an 8-minute job read another's 8.19 GPU-h
    # idle); Slurm's name for it where given
    two = tmp_path / "two"
    shutil.copytree(lake, two)
    r.land(two, "jobs", [r.job("k1", 0, H, cluster="tiger")], batch_id="tiger")
    for args, on in (
        (["--lake", str(two)], "della"),
        (["--slurm-cluster", "prod", "--lake", str(lake)], "prod"),
    ):
        assert runner.invoke(cli, ["job", "j1", "--admin-comment", *args]).exit_code == 0
        assert f"--clusters={on} --format=AdminComment" in (tmp_path / "argv").read_text()
    sacct.write_text("#!/bin/sh\necho\n", encoding="utf-8")  # no comment stored
    none = runner.invoke(cli, ["job", "j1", "--admin-comment", "--lake", str(lake)])
    assert "No gpuledger summary in the job's AdminComment." in none.output


EPILOG = REPO / "deploy" / "slurm" / "epilog-slurmctld-gpuledger.sh"


def _stub(path: Path, text: str) -> None:
    path.write_text("#!/bin/bash\n" + text, encoding="utf-8")
    path.chmod(0o755)


@pytest.mark.parametrize("known", [True, False])
def test_the_epilog_stores_the_summary_with_sacctmgr_retrying_until_slurmdbd_has_it(
    tmp_path, known
):
    # Stand-ins on PATH: gpuledger prints a summary (or fails: a job the lake has not seen);
    # sacctmgr says "Nothing modified" once (slurmdbd not there yet), then records its argv.
    summary = '{"gpuledger":1,"busy":0.5,"idle_gpu_h":0.0,"diagnosis":"mixed","finding":null}'
    _stub(
        tmp_path / "gpuledger",
        f'echo "$@" > {tmp_path}/gpuledger.argv\n'
        + (f"echo '{summary}'\n" if known else "echo 'Error: No job' >&2; exit 1\n"),
    )
    _stub(
        tmp_path / "sacctmgr",
        f'if [ ! -e {tmp_path}/once ]; then touch {tmp_path}/once; echo " Nothing modified"; '
        f'exit 1; fi\nprintf "%s\\n" "$@" > {tmp_path}/sacctmgr.argv\n',
    )
    _stub(tmp_path / "logger", f'echo "$@" >> {tmp_path}/log\n')
    done = gpuledger(
        "bash", str(EPILOG),
        env={
            "PATH": f"{tmp_path}:/usr/bin:/bin",
            "GPULEDGER": str(tmp_path / "gpuledger"),
            "GPULEDGER_EPILOG_PAUSE_S": "0.1",  # the retry's pause (1 s in production)
            "SLURM_JOB_ID": "10",
            "SLURM_ARRAY_JOB_ID": "7",
            "SLURM_ARRAY_TASK_ID": "3",
            "SLURM_CLUSTER_NAME": "della",
            "SLURM_JOB_NAME": "train",
        },
    )  # fmt: skip
    argv = (tmp_path / "sacctmgr.argv").read_text(encoding="utf-8").splitlines()

    assert done.returncode == 0, done.stderr
    # this cluster's job of this name: another cluster in the lake may have a job 7_3
    assert (tmp_path / "gpuledger.argv").read_text().split() == [
        "job",
        "7_3",
        "--slurm-cluster",
        "della",
        "--job-name",
        "train",
        "--format",
        "summary",
    ]
    assert argv[:5] == ["-i", "modify", "job", "where", "jobid=7_3"]
    assert argv[5] == "set"
    stored = parse_admin_comment(argv[6].removeprefix("AdminComment="))
    assert stored is not None
    if known:
        assert stored == json.loads(summary)
    else:
        assert stored["busy"] is None and stored["note"] == "not in the lake at the end"
        assert "no summary: Error: No job" in (tmp_path / "log").read_text()


def test_job_with_slurms_cluster_and_name_reports_that_clusters_job_of_that_name(lake, tmp_path):
    """The epilog's lookup (`--slurm-cluster "$SLURM_CLUSTER_NAME" --job-name
    "$SLURM_JOB_NAME"`): it ran `gpuledger job ID` over every cluster, and stored another
    cluster's job of the same id in the ending job's AdminComment."""
    root = tmp_path / "lake"
    shutil.copytree(lake, root)
    r.land(root, "jobs", [r.job("k1", 0, H, cluster="tiger")], batch_id="tiger")
    r.land(root, "jobs", [r.job("j7", 0, H, job_name="other-work")], batch_id="j7")

    def job(*args: str) -> Result:
        return CliRunner().invoke(
            cli, ["job", *args, "--format", "summary", "--lake", str(root)], env={}
        )

    # della's j1 is not tiger's job (tiger's not collected yet)
    refused = job("j1", "--slurm-cluster", "tiger")
    assert refused.exit_code == 1 and "No job" in refused.output, refused.output
    assert job("j1", "--slurm-cluster", r.CLUSTER).exit_code == 0
    # of a cluster the lake names otherwise: not told apart among several clusters
    unknown = job("j1", "--slurm-cluster", "della-prod", "--job-name", "train")
    assert unknown.exit_code == 1 and "holds no cluster 'della-prod'" in unknown.output
    # a job of the same id and another name is another job
    other = job("j7", "--slurm-cluster", r.CLUSTER, "--job-name", "train")
    assert other.exit_code == 1
    assert "named 'other-work', not 'train'" in other.output


def test_a_job_is_looked_up_on_its_own_cluster_only_where_the_lake_holds_that_cluster(
    lake, mailer, tmp_path
):
    # tiger is in the lake, its job j1 not collected yet: della's j1 is another person's job,
    # never attached. A cluster a one-cluster lake names otherwise (della-prod) is its one
    # cluster, but the job found must carry the subject's job name; with several clusters in
    # the lake, none of them della-prod, which one's job it is cannot be told (by its name
    # alone, another user's `run.sh` went into the mail).
    one = tmp_path / "one"
    shutil.copytree(lake, one)
    r.land(one, "jobs", [r.job("j7", 0, H, job_name="other-work")], batch_id="j7")
    several = tmp_path / "several"
    shutil.copytree(one, several)
    r.land(several, "jobs", [r.job("k1", 0, H, cluster="tiger")], batch_id="tiger")

    def report_line(job: str, cluster: str, root: Path = several) -> str:
        subject = END.replace("Job_id=j1", f"Job_id={job}")
        result = mail(
            mailer, "-s", subject, "mallory", "--lake", str(root), SLURM_CLUSTER_NAME=cluster
        )
        assert result.exit_code == 0, result.output
        _, body = sent(mailer)
        return next(line for line in body.splitlines() if "Job ID" in line or NOTE_PREFIX in line)

    assert "job 'j1' of cluster 'tiger' is not in the lake yet" in report_line("j1", "tiger")
    # on its own cluster too: an id the scheduler gave again, the new job not collected yet
    assert "named 'other-work', not 'train'" in report_line("j7", r.CLUSTER)
    assert "the lake holds no cluster 'della-prod' but several" in report_line("j1", "della-prod")
    assert "named 'other-work', not 'train'" in report_line("j7", "della-prod", one)
    assert report_line("j1", "della-prod", one).strip().startswith("Job ID: j1")


# ---------------------------------------------------------------- is the lake's job this one?

SACCT_HEAD = (
    "JobID|JobIDRaw|User|Account|Partition|State|Submit|Start|End|Elapsed|AllocTRES|ReqTRES|"
    "NodeList|ExitCode|Timelimit|JobName"
)


def sacct_lake(root: Path, *lines: str, cluster: str = "vm") -> Path:
    """A lake of what `collect slurm` lands from these sacct lines (no marts)."""
    from collector.sources.slurm.sacct import jobs_table, parse_sacct
    from warehouse.writer import write_batch

    jobs, bad = parse_sacct("\n".join([SACCT_HEAD, *lines]))
    assert not bad
    write_batch(root, "jobs", jobs_table(cluster, jobs, int(r.T0_E * 1000)), "b1")
    return root


def note_of(body: str) -> str:
    """The note (wrapped in the mail) as one line; '' where the mail has a report."""
    lines = body.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith(NOTE_PREFIX)), None)
    return "" if at is None else " ".join(" ".join(lines[at:]).split())


def test_a_job_the_lake_saw_only_pending_is_not_reported_as_never_started(tmp_path, mailer):
    """The collector expands a pending array record (20_[1-3]) into pending tasks; a short task
    ran and ended between two collections. Its mail said "never started … held no GPUs" and
    told it to ask for a shorter time limit, although Slurm's subject says it ran 2 minutes."""
    root = sacct_lake(
        tmp_path / "lake",
        "20_[1-3]|20|bob|ml|gpu|PENDING|2024-03-01T00:00:00|Unknown|Unknown|00:00:00||"
        "billing=1,cpu=1,gres/gpu=1,mem=16000M,node=1|None assigned|0:0|01:00:00|sweep",
    )
    ran = (
        "Slurm Array Task Job_id=20_2 (22) Name=sweep Ended, Run time 00:02:00, COMPLETED, "
        "ExitCode 0"
    )

    result = mail(mailer, "-s", ran, "alice", "--lake", str(root), SLURM_CLUSTER_NAME="vm")
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert note_of(body) == (
        f"{NOTE_PREFIX}job '20_2' of cluster 'vm' has not been seen running in the lake yet"
    )
    assert "Job Statistics" not in body and "never started" not in body
    # cancelled while it waited (Slurm: run time 0): the lake is right, it never started
    cancelled = ran.replace("00:02:00, COMPLETED", "00:00:00, CANCELLED")
    result = mail(mailer, "-s", cancelled, "alice", "--lake", str(root), SLURM_CLUSTER_NAME="vm")
    _, body = sent(mailer)
    assert "GPUs: 1 asked for, none held (it never started)" in body
    assert "No advice: the job never started" in body and "--time" not in body


def test_a_job_cancelled_while_pending_is_said_never_to_have_started(tmp_path, mailer):
    """sacct gives a job cancelled while it waited a start equal to its end, no node and no
    GPU: its mail said "unobserved … check the GPU-to-job mapping"."""
    root = sacct_lake(
        tmp_path / "lake",
        "6|6|carol|ml|gpu|CANCELLED|2026-12-02T13:01:28|2026-12-02T13:01:29|"
        "2026-12-02T13:01:29|00:00:00||billing=1,cpu=1,gres/gpu=8,mem=16000M,node=1|"
        "None assigned|0:0|Partition_Limit|job6",
    )
    subject = "Slurm Job_id=6 Name=job6 Ended, Run time 00:00:00, CANCELLED, ExitCode 0"
    handled = (dt.datetime(2026, 12, 2, 13, 1, 30, tzinfo=dt.UTC) - r.T0).total_seconds()

    result = mail(
        mailer, "-s", subject, "carol", "--lake", str(root), at=handled, SLURM_CLUSTER_NAME="vm"
    )
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "GPUs: 8 asked for, none held (it never started)" in body
    assert "Start Time: -" in body
    assert "not started: nothing ran" in body
    assert "No advice: the job never started" in body
    assert "unobserved" not in body and "mapping" not in body and "telemetry" not in body


def test_a_node_failures_mail_says_slurm_may_have_requeued_it(tmp_path, mailer):
    """Slurm requeues a batch job after a NODE_FAIL (JobRequeue=1) once its FAIL mail went out:
    "Resubmit it from its last checkpoint" made the owner who did run it twice."""
    r.build_lake(
        tmp_path / "lake",
        samples=r.samples(range(0, int(H), 30), engine_active=0.9, sm_active=0.9),
        jobs=[
            r.job(
                "500",
                0,
                None,
                state="RUNNING",
                job_name="train",
                time_limit_s=int(8 * H),
                updated_ts=r.at(H),
            )
        ],
        job_gpus=[r.job_gpu("500", 0, None)],
    )
    subject = "Slurm Job_id=500 Name=train Failed, Run time 01:00:00, NODE_FAIL, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(tmp_path / "lake"), at=H + 30)
    said = " ".join(sent(mailer)[1].split())

    assert result.exit_code == 0, result.output
    assert "State: NODE_FAIL" in said
    assert "The job ended through a node failure, not through a fault of its own." in said
    assert "Slurm requeues a batch job after a node failure unless it was submitted with " in said
    assert "--no-requeue (or the site set JobRequeue=0)" in said
    assert "check `squeue -j 500` or wait for a Requeued mail before resubmitting it" in said


@pytest.fixture(scope="module")
def requeued(tmp_path_factory) -> Path:
    """200: requeued once, its first run over [0, 1 h) idle, its last over [2 h, 3 h) busy
    0.9. 300: the same runs, but the lake still holds the first as running (requeued and run
    again between two collections). 301: requeued, the lake holding only its last run."""
    root = tmp_path_factory.mktemp("requeued")
    first, last = range(0, int(H), 30), range(int(2 * H), int(3 * H), 30)
    r.build_lake(
        root,
        samples=[
            row
            for node in ("g001", "g002")  # 200 on g001, 300 on g002
            for row in r.samples(first, node=node, engine_active=0.0, sm_active=0.0)
            + r.samples(last, node=node, engine_active=0.9, sm_active=0.9)
        ]
        + r.samples(last, gpu_index=1, engine_active=0.9, sm_active=0.9),
        jobs=[
            r.job("200", 2 * H, 3 * H, job_name="train", requeues=1, time_limit_s=int(4 * H)),
            r.job(
                "300",
                0,
                None,
                state="RUNNING",
                job_name="train",
                time_limit_s=int(4 * H),
                updated_ts=r.at(H / 2),
            ),
            r.job("301", 2 * H, 3 * H, job_name="train", requeues=1, time_limit_s=int(4 * H)),
        ],
        job_gpus=[
            r.job_gpu("200", 0, H),
            r.job_gpu("200", 2 * H, 3 * H),
            r.job_gpu("300", 0, None, node="g002"),
            r.job_gpu("301", 2 * H, 3 * H, gpu_index=1),
        ],
    )
    return root


def test_a_requeued_jobs_mail_says_its_figures_include_its_earlier_runs(requeued, mailer):
    """200's mail said "GPU-hours: 2.00 allocated … idle 50%" of a last run 90 % busy, without
    a word of its earlier run."""
    subject = "Slurm Job_id=200 Name=train Ended, Run time 01:00:00, COMPLETED, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(requeued), at=3 * H + 30)
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "Requeued: 1 time (the figures below include its earlier run)" in body
    assert "GPU-hours: 2.00 allocated" in body
    # the lake holds its last run alone: how often, and no more
    only_last = subject.replace("Job_id=200", "Job_id=301")
    mail(mailer, "-s", only_last, "alice", "--lake", str(requeued), at=3 * H + 30)
    _, body = sent(mailer)
    assert "Requeued: 1 time\n" in body
    assert "GPU-hours: 1.00 allocated" in body


def test_a_running_record_that_starts_before_this_run_is_reported_with_a_caveat(requeued, mailer):
    """The lake still holds 300's first run as running: its mail showed that run's start and
    3.00 GPU-hours allocated for a 1-hour 1-GPU run without a word. Slurm's run time leaves
    out time suspended, so a suspended job's record starts as early: the report goes out,
    saying both."""
    subject = "Slurm Job_id=300 Name=train Ended, Run time 01:00:00, COMPLETED, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(requeued), at=3 * H + 30)
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "Job ID: 300" in body
    said = " ".join(body.split())
    assert (
        "Note: its record in the lake starts 2024-03-01 00:00 UTC, 2.0 h before Slurm's run "
        "time puts this run's start: it was suspended that long, or it was requeued since the "
        "lake saw it and the figures below hold its earlier run too."
    ) in said
    assert all(len(line) <= MAIL_WIDTH for line in body.splitlines())
    # where Slurm's run time puts its start there, no caveat
    mail(mailer, "-s", subject.replace("01:00:00", "03:00:00"), "a", "--lake", str(requeued),
         at=3 * H + 30)  # fmt: skip
    body = sent(mailer)[1]
    assert "Job ID: 300" in body and "Note: its record" not in body


def test_a_record_that_starts_after_this_run_did_is_not_its_report(requeued, mailer):
    """A record can start before the run time says (time suspended), never after it: 301's
    last run started at 2 h, where a 3-hour run ending at 3 h started at 0."""
    subject = "Slurm Job_id=301 Name=train Ended, Run time 03:00:00, COMPLETED, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(requeued), at=3 * H + 30)
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "Job Statistics" not in body
    assert note_of(body).startswith(
        f"{NOTE_PREFIX}job '301' in the lake is of a run that started 2024-03-01 02:00 UTC, "
        "not of the run this mail is about (started about 2024-03-01 00:00 UTC): another job"
    )


@pytest.mark.parametrize(
    ("after_end_h", "why"),
    [
        (48, "in the lake ended 2024-03-01 01:00 UTC, more than a day before this mail: "
             "another job of the same id (the scheduler's job ids began again)"),
        (2, "in the lake is of a run that started 2024-03-01 00:00 UTC and ended 2024-03-01 "
            "01:00 UTC, not of the run this mail is about (started about 2024-03-01 02:55 UTC): "
            "an earlier run of it or another job of the same id"),
    ],
)  # fmt: skip
def test_an_older_job_of_the_same_id_and_name_is_not_this_one(lake, mailer, after_end_h, why):
    """The scheduler's ids began again (a state reset, MaxJobId): the lake's j1 of the same
    name, which ended long before, went into the mail of a job that ran 5 minutes."""
    subject = "Slurm Job_id=j1 Name=train Ended, Run time 00:05:00, COMPLETED, ExitCode 0"

    result = mail(
        mailer, "-s", subject, "alice", "--lake", str(lake), at=H + after_end_h * H,
        SLURM_CLUSTER_NAME=r.CLUSTER,
    )  # fmt: skip
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "Job Statistics" not in body
    assert note_of(body).startswith(f"{NOTE_PREFIX}job 'j1' of cluster 'della' {why}")


def test_a_heterogeneous_jobs_name_is_its_leaders(tmp_path, mailer):
    """Slurm mails a heterogeneous job under its leader's (component 0's) name; its other
    components may have names of their own: the report was dropped ("job '1014+1' … named
    'het2', not 'het'")."""
    r.build_lake(
        tmp_path / "lake",
        jobs=[r.job("1014+0", 0, H, job_name="het"), r.job("1014+1", 0, H, job_name="het2")],
        job_gpus=[r.job_gpu(f"1014+{i}", 0, H, gpu_index=i) for i in (0, 1)],
    )
    subject = "Slurm Job_id=1014 Name=het Ended, Run time 01:00:00, COMPLETED, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(tmp_path / "lake"))
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    ids = [line.split(":", 1)[1].strip() for line in body.splitlines() if "Job ID:" in line]
    assert ids == ["1014+0", "1014+1"]
    # a leader of another name is another job
    mail(mailer, "-s", subject.replace("Name=het", "Name=het2"), "a", "--lake",
         str(tmp_path / "lake"))  # fmt: skip
    assert "named 'het', not 'het2'" in note_of(sent(mailer)[1])


def test_a_suspended_jobs_mail_carries_its_report(tmp_path, mailer):
    """Slurm's run time leaves out time suspended: 900 ran over [0, 3 h) with an hour
    suspended, its mail saying "Run time 02:00:00"; it was refused as another run's."""
    r.build_lake(
        tmp_path / "lake",
        samples=r.samples(range(0, int(3 * H), 60), engine_active=0.8),
        jobs=[r.job("900", 0, 3 * H, job_name="train")],
        job_gpus=[r.job_gpu("900", 0, 3 * H)],
    )
    subject = "Slurm Job_id=900 Name=train Ended, Run time 02:00:00, COMPLETED, ExitCode 0"

    result = mail(mailer, "-s", subject, "alice", "--lake", str(tmp_path / "lake"), at=3 * H + 30)
    _, body = sent(mailer)

    assert result.exit_code == 0, result.output
    assert "Job ID: 900" in body
    assert "no report" not in body
