"""Per-job and per-user efficiency: low-efficiency users, MIG candidates, long time limits,
power-cap candidates. All read one line per job (sql/detectors/job_profiles.sql).

Windows such as "the last 7 days" end at the lake's latest job time or at `now`, whichever is
earlier, so a lake of last month's data is judged as of its own end.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, as_of, by_cluster, evidence, period_anchor
from detectors.rules.thresholds import EfficiencyThresholds, PowerThresholds
from detectors.wording import counted, counted_expr

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["MIG_PROFILES", "RULES", "EfficiencyThresholds", "PowerThresholds"]

QUERY = "detectors/job_profiles"
# MIG profiles of one GPU: (compute slices of 7, share of memory); named "<k>g.<GB>gb".
MIG_PROFILES: tuple[tuple[int, float], ...] = ((1, 1 / 8), (2, 2 / 8), (3, 4 / 8), (4, 4 / 8))
MIG_HEADROOM = 1.2  # ask for 20 % more memory and compute than the job's peak/mean


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since}


def _low_efficiency_users(
    jobs: pl.DataFrame, t: EfficiencyThresholds, window: Window
) -> pl.DataFrame:
    end = as_of(jobs, window, "start_ts", "end_ts")
    span = dt.timedelta(days=t.user_window_days)
    # The id names the period that contains `end`, so reruns within it update one finding.
    anchor = period_anchor(end, span)
    recent = jobs.filter(
        (pl.col("start_ts") < end) & (pl.col("end_ts").fill_null(end) >= end - span)
    )
    # A job counts for the part of its run inside the window, its figures in proportion: one
    # GPU idle for 30 days was "720 of 720 GPU-h" wasted "over the last 7 days" (168 at most).
    stop = pl.min_horizontal(pl.col("end_ts").fill_null(end), pl.lit(end))
    begin = pl.max_horizontal(pl.col("start_ts"), pl.lit(end - span))
    run_s = (pl.col("end_ts").fill_null(end) - pl.col("start_ts")).dt.total_seconds()
    inside = (stop - begin).dt.total_seconds().clip(0)
    part = pl.when(run_s > 0).then(inside / run_s).otherwise(1.0).clip(0, 1)
    recent = recent.with_columns(
        (pl.col(c) * part).alias(c)
        for c in ("alloc_gpu_h", "observed_gpu_h", "effective_gpu_h", "idle_gpu_h")
    )
    users = (
        recent.filter(pl.col("user").is_not_null())
        .group_by("cluster", "user")
        .agg(
            pl.col("account").mode().first(),
            pl.len().alias("jobs"),
            pl.col("alloc_gpu_h").sum(),
            pl.col("observed_gpu_h").sum(),
            pl.col("effective_gpu_h").sum(),
            pl.col("idle_gpu_h").sum(),
        )
        # Of the allocated GPU-hours the telemetry saw: what no sample covered is not known
        # to be wasted (a cluster without telemetry read "0.0% efficient, 0.0 of 117.6 GPU-h
        # did work"), and the waste is what was seen held and not worked.
        .with_columns(
            (pl.col("effective_gpu_h") / pl.col("observed_gpu_h")).alias("ratio"),
            (pl.col("observed_gpu_h") - pl.col("effective_gpu_h")).clip(0).alias("wasted_gpu_h"),
        )
        # Rank among all users first, then filter: a user who passes never makes room for
        # another, so raising any threshold can only remove findings.
        .sort("cluster", "wasted_gpu_h", "user", descending=[False, True, False])
        .with_columns(pl.int_range(1, pl.len() + 1).over("cluster").alias("rank"))
        .filter(
            (pl.col("rank") <= t.user_top_n)
            & (pl.col("observed_gpu_h") >= t.user_min_gpu_h)
            & (pl.col("ratio") <= t.user_max_ratio)
        )
    )
    return users.with_columns(
        pl.lit("low_efficiency_user").alias("detector"),
        pl.lit(Severity.WARN.value).alias("severity"),
        pl.lit("user").alias("subject_kind"),
        pl.col("user").alias("subject_id"),
        pl.lit(anchor).alias("anchor_ts"),
        pl.lit(None, pl.String).alias("job_id"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(end - span).alias("start_ts"),
        pl.lit(end).alias("end_ts"),
        pl.lit(False).alias("predicted"),
        (1 - pl.col("ratio")).clip(0, 1).cast(pl.Float32).alias("score"),
        pl.col("wasted_gpu_h").alias("gpu_h_at_stake"),
        pl.format(
            "User {} ({}): {}% efficient over the last {} — {} of the {} allocated GPU-h "
            "the telemetry saw did work across {}; #{} in GPU-hours wasted",
            "user",
            pl.col("account").fill_null("no account"),
            (pl.col("ratio") * 100).round(1),
            pl.lit(counted(t.user_window_days, "day")),
            pl.col("effective_gpu_h").round(1),
            pl.col("observed_gpu_h").round(1),
            counted_expr("jobs", "job"),
            "rank",
        ).alias("message"),
        evidence(
            "jobs",
            "alloc_gpu_h",
            "observed_gpu_h",
            "effective_gpu_h",
            "idle_gpu_h",
            "ratio",
            "rank",
        ),
    ).pipe(as_frame)


def _mig_profile(fb_frac: float | None, busy: float | None) -> tuple[int, float] | None:
    """The smallest MIG profile with room for the job's memory and compute, or None."""
    if fb_frac is None or busy is None:
        return None
    for slices, mem in MIG_PROFILES:
        if mem >= fb_frac * MIG_HEADROOM and slices / 7 >= busy * MIG_HEADROOM:
            return slices, mem
    return None


def _mig_candidates(jobs: pl.DataFrame, t: EfficiencyThresholds) -> pl.DataFrame:
    """Lightly used jobs: one MIG slice where one slice holds the job's whole use (all its
    GPUs' compute and memory together), else fewer whole GPUs (a multi-GPU job); else none."""
    busy = pl.coalesce("sm_active_mean", "busy_mean")
    fb_frac = pl.col("fb_used_mib_max") / pl.col("fb_total_mib")
    gpus = pl.col("gpus").fill_null(1).clip(1)
    signal = pl.when(pl.col("sm_active_mean").is_null()).then(pl.lit("gpu_util"))
    small = jobs.with_columns(
        fb_frac.alias("fb_frac"),
        busy.alias("busy"),
        signal.otherwise(pl.lit("sm_active")).alias("signal"),
    ).filter(
        # a job on MIG slices already is sized in slices: "use a 1g.10gb slice" was told to
        # a job on one, "freeing" 6/7 of a GPU it never held
        ~pl.col("on_mig")
        & (pl.col("fb_frac") <= t.mig_fb_max_frac)
        & (
            pl.when(pl.col("signal") == "gpu_util")
            .then(pl.col("busy") <= t.mig_util_max)
            .otherwise(pl.col("busy") <= t.mig_busy_max)
        )
        & (pl.col("busy_mean") >= t.mig_busy_min)
        & (pl.col("observed_gpu_h") / gpus >= t.mig_min_hours)
    )
    # the whole job's use: each GPU's peak memory and mean activity, times its GPUs
    n = small.select(gpus).to_series()
    profiles = [
        _mig_profile(f * k, b * k)
        for f, b, k in zip(small["fb_frac"], small["busy"], n, strict=True)
    ]
    # GPUs enough for all of it (with the same headroom), where no one slice is
    needed = (
        (pl.max_horizontal(pl.col("busy"), pl.col("fb_frac")) * gpus * MIG_HEADROOM)
        .ceil()
        .clip(1)
        .cast(pl.Int64)
    )
    small = (
        small.with_columns(
            pl.Series("slices", [p[0] if p else None for p in profiles], pl.Int64),
            pl.Series("mem_frac", [p[1] if p else None for p in profiles], pl.Float64),
        )
        .with_columns(
            pl.when(pl.col("slices").is_null()).then(needed).alias("gpus_needed"),
        )
        .filter(pl.col("slices").is_not_null() | (pl.col("gpus_needed") < gpus))
    )
    gb = (pl.col("fb_total_mib") * pl.col("mem_frac") / 1024).round(0).cast(pl.Int64)
    profile = pl.format("{}g.{}gb", "slices", gb)
    saved = (
        pl.when(pl.col("slices").is_not_null())
        .then(pl.col("alloc_gpu_h") * (1 - pl.col("slices") / 7 / gpus))
        .otherwise(pl.col("alloc_gpu_h") * (1 - pl.col("gpus_needed") / gpus))
    )
    change = (
        pl.when(pl.col("slices").is_null())
        .then(
            pl.format(
                "together {} would do: ask for --gres=gpu:{}",
                counted_expr("gpus_needed", "GPU"),
                "gpus_needed",
            )
        )
        .when(gpus > 1)
        .then(pl.format("one MIG {} slice would hold all of it", "mig_profile"))
        .otherwise(pl.format("a MIG {} slice would do", "mig_profile"))
    )
    return (
        small.with_columns(
            profile.alias("mig_profile"),
            pl.lit("overallocated").alias("detector"),
            pl.lit(Severity.INFO.value).alias("severity"),
            pl.lit("job").alias("subject_kind"),
            pl.col("job_id").alias("subject_id"),
            pl.col("start_ts").alias("anchor_ts"),
            pl.lit(None, pl.String).alias("node"),
            pl.lit(None, pl.String).alias("gpu_uuid"),
            pl.lit(False).alias("predicted"),
            (
                1
                - pl.col("busy")
                / pl.when(pl.col("signal") == "gpu_util")
                .then(pl.lit(max(t.mig_util_max, 1e-9)))
                .otherwise(pl.lit(max(t.mig_busy_max, 1e-9)))
            )
            .clip(0, 1)
            .cast(pl.Float32)
            .alias("score"),
            saved.alias("gpu_h_at_stake"),
        )
        .with_columns(
            pl.format(
                "Job {} ({}): peak memory {}% of a GPU and {}% busy on {}; {} (frees {} GPU-h)",
                "job_id",
                pl.col("user").fill_null("unknown user"),
                (pl.col("fb_frac") * 100).round(0).cast(pl.Int64),
                (pl.col("busy") * 100).round(0).cast(pl.Int64),
                counted_expr("gpus", "GPU"),
                change,
                saved.round(2),
            ).alias("message"),
            evidence(
                "fb_used_mib_max",
                "fb_total_mib",
                "busy",
                "signal",
                "gpus",
                "mig_profile",
                "gpus_needed",
                "model",
            ),
        )
        .pipe(as_frame)
    )


def _time_limits(jobs: pl.DataFrame, t: EfficiencyThresholds) -> pl.DataFrame:
    done = jobs.filter(
        pl.col("state").str.starts_with("COMPLETED")
        & (pl.col("gpus").fill_null(0) > 0)  # CPU-only jobs are not this tool's business
        & (pl.col("runtime_s") >= max(t.limit_min_runtime_minutes * 60, 1))
        & (pl.col("time_limit_s") >= t.limit_ratio * pl.col("runtime_s"))
    )
    # Suggest 1.5x the run time, rounded up to a quarter hour: what `gpuledger job` and the
    # job-end mail advise for the same job (detectors/job_advice.py; this said 7:30:00 where
    # they said 07:15:00)
    suggested_s = ((pl.col("runtime_s") * 1.5 / 900).ceil() * 900).cast(pl.Int64)
    reserved = pl.col("gpus").fill_null(1) * (pl.col("time_limit_s") - pl.col("runtime_s")) / 3600
    return (
        done.with_columns(
            suggested_s.alias("suggested_limit_s"),
            reserved.alias("unused_reservation_gpu_h"),
            (pl.col("time_limit_s") / pl.col("runtime_s")).alias("limit_ratio"),
        )
        .with_columns(
            pl.lit("time_limit_excess").alias("detector"),
            pl.lit(Severity.INFO.value).alias("severity"),
            pl.lit("job").alias("subject_kind"),
            pl.col("job_id").alias("subject_id"),
            pl.col("start_ts").alias("anchor_ts"),
            pl.lit(None, pl.String).alias("node"),
            pl.lit(None, pl.String).alias("gpu_uuid"),
            pl.lit(False).alias("predicted"),
            (1 - 1 / pl.col("limit_ratio")).cast(pl.Float32).alias("score"),
            # Nothing was burnt: an oversized limit costs the scheduler backfill room, not GPU time.
            pl.lit(0.0).alias("gpu_h_at_stake"),
            pl.format(
                "Job {} ({}): ran {} min of a {} min limit ({}x); --time={}:{}:00 would do",
                "job_id",
                pl.col("user").fill_null("unknown user"),
                (pl.col("runtime_s") / 60).round(0).cast(pl.Int64),
                (pl.col("time_limit_s") / 60).round(0).cast(pl.Int64),
                pl.col("limit_ratio").round(1),
                (pl.col("suggested_limit_s") // 3600),
                (pl.col("suggested_limit_s") % 3600 // 60).cast(pl.String).str.zfill(2),
            ).alias("message"),
            evidence(
                "runtime_s",
                "time_limit_s",
                "limit_ratio",
                "suggested_limit_s",
                "unused_reservation_gpu_h",
            ),
        )
        .pipe(as_frame)
    )


def _power_caps(jobs: pl.DataFrame, t: PowerThresholds) -> pl.DataFrame:
    busy = pl.coalesce("sm_active_mean", "busy_mean")
    cap_w = pl.col("power_limit_w") * t.power_cap_frac
    # Energy above the cap while the job ran (from its mean power: a lower bound where power
    # varies, since time above the mean also sits above the cap more often).
    kwh = pl.col("observed_gpu_h") * (pl.col("power_w_mean") - cap_w).clip(0) / 1000
    hot = jobs.with_columns(
        busy.alias("busy"), cap_w.alias("cap_w"), kwh.alias("kwh_saved")
    ).filter(
        (pl.col("power_w_mean") >= t.power_min_frac * pl.col("power_limit_w"))
        & (pl.col("busy") <= t.power_busy_max)
        & (pl.col("observed_gpu_h") >= t.power_min_hours)
        & (pl.col("kwh_saved") >= t.power_min_kwh)
    )
    return hot.with_columns(
        pl.lit("power_cap_candidate").alias("detector"),
        pl.lit(Severity.INFO.value).alias("severity"),
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.col("start_ts").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(False).alias("predicted"),
        (1 - pl.col("busy") / max(t.power_busy_max, 1e-9))
        .clip(0, 1)
        .cast(pl.Float32)
        .alias("score"),
        # Energy, not GPU time: a cap at low activity costs little speed (kWh in the evidence).
        pl.lit(0.0).alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}): {} W mean at {}% SM activity; a {} W cap (nvidia-smi -pl) would save "
            "about {} kWh with little slowdown",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            pl.col("power_w_mean").round(0).cast(pl.Int64),
            (pl.col("busy") * 100).round(0).cast(pl.Int64),
            pl.col("cap_w").round(0).cast(pl.Int64),
            pl.col("kwh_saved").round(1),
        ).alias("message"),
        evidence("power_w_mean", "power_limit_w", "busy", "cap_w", "kwh_saved", "observed_gpu_h"),
    ).pipe(as_frame)


def _detect_efficiency(jobs: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.efficiency
    return pl.concat(
        [
            by_cluster(jobs, lambda part: _low_efficiency_users(part, t, window)),
            _mig_candidates(jobs, t),
            _time_limits(jobs, t),
        ],
        how="vertical",
    )


def _detect_power(jobs: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    return _power_caps(jobs, config.power)


RULES = (
    Rule("efficiency", QUERY, _params, _detect_efficiency),
    Rule("power", QUERY, _params, _detect_power),
)
