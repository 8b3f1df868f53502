"""`gpuledger check`: audit a lake's findings and marts against the facts they come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from app.errors import reports_errors
from app.options import lake_option

if TYPE_CHECKING:
    from warehouse.lake import Lake

__all__ = ["command"]


@click.command(name="check")
@lake_option
def command(lake: Lake) -> None:
    """Audit the lake: every figure bounded by the facts, the marts adding up.

    \b
    Checks (each one SQL file under sql/check/, the same the test suite runs):
      job_gpu_hours       a job's finding (GPU-hours at stake) and its job_usage row
                          (allocated, observed GPU-hours) never exceed the GPUs of the job's
                          nodes × the job's time inside the data; a running job ends at the
                          end of its cluster's data, never at the wall clock
      observed_within_held
                          no recorded job is observed longer than it held its GPUs (its
                          samples' owners and its allocations agree)
      owner_gpu_hours     a user's or account's finding never exceeds its allocated GPU-hours
      hardware_gpu_hours  a GPU's or node's finding never exceeds its GPUs × the data's span
      findings_in_data    no finding begins or ends after its cluster's data ends
      mart_occupancy      each occupancy bucket: allocated + unallocated + unobserved = GPUs
      mart_totals         per job active + idle = observed; the daily, per-GPU and per-bucket
                          marts add up to job_usage
      throughput_bounded  a job's reported parameters × tokens/s never claim more FLOP/s
                          than its GPUs' peak (else a wrong count: it gets no MFU)

    \b
    Prints one line when the lake is consistent (exit 0), else one line per violation,
    `check [cluster] subject: why`, and exits 1. A lake it cannot audit (no marts, a damaged
    file) is one `Error:` line and exit 2, so a cron job tells the two apart. Reads only;
    runs in seconds on marts of any size. Build the marts first (`gpuledger attribute`); run
    it after `gpuledger detect` to audit the findings too.

    \b
    Example:
      gpuledger check --lake ./lake
    """
    import sys

    try:
        _audit(lake)
    except click.ClickException as exc:  # could not audit: not a violation found
        raise CannotAudit(exc.message) from exc
    except OSError as exc:
        raise CannotAudit(f"cannot read the lake: {exc}") from exc
    except Exception as exc:
        duckdb = sys.modules.get("duckdb")  # marts of another version, say: no audit either
        if duckdb is None or not isinstance(exc, duckdb.Error):
            raise
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CannotAudit(f"the marts cannot be audited ({reason})") from exc


class CannotAudit(click.ClickException):
    """A lake `check` could not audit: exit 2 (1: violations found; 2 is also click's for a
    usage error, which is no audit either)."""

    exit_code = 2


@reports_errors
def _audit(lake: Lake) -> None:
    from warehouse.checks import CHECKS, run_checks

    con = lake.connect(require=("job_usage",))
    con.execute("SET enable_progress_bar = false")
    try:
        violations = run_checks(con)
        (clusters,) = con.execute("SELECT count(*) FROM data_extent").fetchone() or (0,)
        (findings,) = con.execute("SELECT count(*) FROM findings").fetchone() or (0,)
    finally:
        con.close()
    scope = (
        f"{len(CHECKS)} checks over {clusters:,} cluster(s), {findings:,} findings in {lake.root}"
    )
    if not violations:
        click.echo(f"0 violations: {scope}")
        return
    for violation in violations:
        click.echo(violation.line())
    click.echo(f"{len(violations):,} violation(s): {scope}", err=True)
    raise SystemExit(1)
