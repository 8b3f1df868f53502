"""`gpuledger detect`: run every finding producer over the lake and upsert the findings.

The work is `app.pipeline.detect` (the rules with each detector's thresholds, the other
producers, the scopes, the upsert, the recommendations) with the configuration file's
`[detect.<detector>]` and `[recommend.<kind>]` tables; this module parses the command line and
prints the summary.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.commands.config import config_option
from app.errors import reports_errors
from app.options import Timestamp, lake_option, lake_writer, no_wait_option

if TYPE_CHECKING:
    import pyarrow as pa

    from app.pipeline import PipelineConfig
    from warehouse.lake import Lake

__all__ = ["command", "pipeline_and_lake"]

TOP_FINDINGS = 5  # how many findings the summary spells out


def pipeline_and_lake(
    config_path: Path | None, lake: Lake, **flags: Any
) -> tuple[PipelineConfig, Lake]:
    """The pipeline's configuration, and the lake: --lake (or $GPULEDGER_LAKE) when given, else
    the `lake` of the configuration file (as `gpuledger alert` and `run` do)."""
    from click.core import ParameterSource

    from app.config import load_config
    from app.pipeline import pipeline_config
    from warehouse.lake import Lake

    cfg = load_config(config_path)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.get_parameter_source("lake") == ParameterSource.DEFAULT:
        lake = Lake.at(cfg.lake.root)
    return pipeline_config(cfg, **flags), lake


def _summary(findings: pa.Table) -> list[str]:
    import polars as pl

    frame = pl.from_arrow(findings)
    assert isinstance(frame, pl.DataFrame)
    if frame.is_empty():
        return ["No findings."]
    per = (
        frame.group_by("detector")
        .agg(
            pl.len().alias("findings"),
            (pl.col("severity") == "critical").sum().alias("critical"),
            pl.col("gpu_h_at_stake").sum().alias("gpu_h"),
        )
        .sort("gpu_h", "detector", descending=[True, False])
    )
    lines = [f"{'detector':<22} {'findings':>8} {'critical':>8} {'GPU-h at stake':>15}"]
    for row in per.iter_rows(named=True):
        lines.append(
            f"{row['detector']:<22} {row['findings']:>8} {row['critical']:>8} "
            f"{row['gpu_h'] or 0.0:>15,.1f}"
        )
    top = frame.sort("gpu_h_at_stake", "finding_id", descending=[True, False], nulls_last=True)
    lines.append("")
    lines.append(f"Top {min(TOP_FINDINGS, len(frame))} by GPU-hours at stake:")
    for row in top.head(TOP_FINDINGS).iter_rows(named=True):
        lines.append(f"  [{row['severity']}] {row['message']}")
    return lines


@click.command("detect")
@config_option
@lake_option
@click.option(
    "--since",
    type=Timestamp(),
    default=None,
    help="Store only findings about problems seen from this time on (ISO, UTC); their figures "
    "still come from all the data: a job's whole run, a user's whole 7 days [default: all].",
)
@click.option(
    "--now",
    type=Timestamp(),
    default=None,
    help="Judge as of this time: stamps detected_ts and ends windows such as a user's last "
    "7 days [default: the current time; figures, spans and windows never run past the end of "
    "each cluster's data: a job still running is counted up to there].",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the one-line total.")
@no_wait_option
@reports_errors
def command(
    config_path: Path | None,
    lake: Lake,
    since: dt.datetime | None,
    now: dt.datetime | None,
    quiet: bool,
    no_wait: bool,
) -> None:
    """Find waste and failing hardware in the lake and store the findings.

    \b
    Rules (thresholds documented in docs/detectors.md, "Thresholds"):
      idle_job, memory_hold, hung_job         jobs whose GPUs do nothing (or spin on a stall)
      partial_idle, straggler_gpu             multi-GPU jobs with idle or lagging GPUs
      low_efficiency_user                     ratio AND GPU-hours AND top-N over 7 days
      overallocated, time_limit_excess        MIG candidates; limits far above run time
      power_cap_candidate                     low activity at high power, kWh a cap saves
      throttling, xid_hardware, ecc_dbe,      hardware health (NVIDIA's XID classes,
      row_remap_failure, row_remap_pending    clock-event bits, ECC, row remapping)
      gpu_health_trend                        early warning: corrected-ECC climb against the
                                              fleet's baseline, precursor XIDs 63/92/119/120
      gpu_without_job, job_without_data       attribution self-check
      failed_after_hw_event, lost_gpu_hours,  resilience; Young/Daly checkpoint advice
      checkpoint_interval
      stranded_gpus                           CPU/memory requests that strand a node's GPUs
      low_mfu                                 large training jobs at a low reported MFU
      bottleneck                              input-, memory-, communication-bound or
                                              underused jobs, with the fix (`gpuledger job`)

    \b
    Then the scheduler-policy recommendations are replayed from the lake's history
    (idle-cancel policy, time limits, GPU caps, fair-share, billing weights, MIG packing,
    draining nodes, power caps) into the `recommendations` table, each with its evidence and
    the exact sacctmgr/scontrol/slurm.conf lines or Kueue YAML to apply.

    \b
    Each detector and recommender is configured in the configuration file (check it with
    `gpuledger config check`): [detect.<detector>] and [recommend.<kind>] tables take its
    thresholds, `enabled = false`, and a scope (partitions, exclude_partitions,
    exclude_accounts, exclude_users, exclude_qos). Every finding's evidence records the
    configuration that produced it (config.id and the detector's thresholds).

    \b
    Findings go to the lake's `findings` table: a problem found again keeps its finding_id
    and first detected_ts, so running detect twice stores nothing twice. With --since, the
    findings about problems that ended before it are left as stored; the others are computed
    over all the data, so a finding is never rewritten from a shorter window. Build the
    marts first with `gpuledger attribute`. One writer at a time: beside `gpuledger run` or
    another attribute/detect, it waits for the other (naming it on stderr), or with --no-wait
    exits at once.

    \b
    Example:
      gpuledger attribute --lake ./lake && gpuledger detect --lake ./lake --since 2026-11-01
    """
    if since is not None and now is not None and since >= now:
        raise click.BadParameter("must be before --now", param_hint="--since")
    from app.pipeline import detect

    config, lake = pipeline_and_lake(config_path, lake)
    with lake_writer(lake, "detect", no_wait):
        outcome = detect(lake, config, now or dt.datetime.now(dt.UTC), since)
    findings = outcome.findings
    if not quiet:
        for line in _summary(findings):
            click.echo(line)
    click.echo(
        f"{findings.num_rows:,} findings: {outcome.new:,} new, {outcome.updated:,} updated, "
        f"{outcome.unchanged:,} unchanged, "
        f"in {lake.root / 'findings'}; {outcome.recommendations:,} recommendations in "
        f"{lake.root / 'recommendations'}"
    )
