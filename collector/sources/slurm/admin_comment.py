"""Read one job's AdminComment from sacct (where a slurmctld epilog stores gpuledger's summary).

One field of one allocation line (`-X`), so the whole line is the comment, `|` and all.
"""

from __future__ import annotations

from collector.sources.slurm.collect import Runner, run_command

__all__ = ["read_admin_comment"]


def read_admin_comment(
    job_id: str, runner: Runner = run_command, *, cluster: str | None = None
) -> str | None:
    """The AdminComment of `job_id` (array tasks as `7_3`; the latest run of a requeued job)
    on `cluster` (sacct's `--clusters`; None: the local cluster), None when sacct has none.
    Raises SlurmCommandError when sacct fails."""
    on = [f"--clusters={cluster}"] if cluster else []
    out = runner(["sacct", "--noheader", "--parsable2", "--allusers", "-X", *on,
                  "--format=AdminComment", f"--jobs={job_id}"])  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if lines else None
