"""Large training jobs at a low model FLOPs utilisation (MFU), from what their training loop
reported (`collector.throughput`; `job_usage.mfu`).

MFU = 6 × parameters × tokens/s ÷ the GPUs' peak dense BF16 FLOP/s: the share of the hardware's
arithmetic that went into the model. Well-tuned large-model training reaches 35–55 % on H100 and
A100 GPUs; a large job far below that spends most of its GPU-hours waiting (on data, on
communication, on small kernels). Jobs without a parameter count, or on a GPU model without a
known peak, have no MFU and are never flagged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from detectors.findings import Severity, as_frame
from detectors.rules.base import Rule, Window, evidence
from detectors.rules.thresholds import MfuThresholds

if TYPE_CHECKING:
    from detectors.rules.config import RuleConfig

__all__ = ["RULES", "MfuThresholds"]

QUERY = "detectors/job_profiles"


def _params(config: RuleConfig, window: Window) -> dict[str, Any]:
    return {"since": window.since}


def _low_mfu(jobs: pl.DataFrame, config: RuleConfig, window: Window) -> pl.DataFrame:
    t = config.mfu
    hours = pl.col("alloc_gpu_h") / pl.col("gpus")
    fix = pl.format(
        "Run `gpuledger job {}` for its bottleneck, then profile a few steps (torch.profiler): "
        "a larger per-GPU batch, data loading that overlaps compute (DataLoader num_workers, "
        "pin_memory), overlapped gradient communication, BF16 and fused kernels.",
        "job_id",
    )
    low = jobs.with_columns(hours.alias("hours"), fix.alias("fix")).filter(
        pl.col("mfu").is_not_null()
        & (pl.col("mfu") < t.mfu_max)
        & (pl.col("gpus") >= t.mfu_min_gpus)
        & (pl.col("hours") >= t.mfu_min_hours)
    )
    # At the floor's MFU the same tokens would have taken mfu / mfu_max of the GPU time.
    saved = pl.col("alloc_gpu_h") * (1 - pl.col("mfu") / t.mfu_max)
    return low.with_columns(
        pl.lit("low_mfu").alias("detector"),
        pl.lit(Severity.INFO.value).alias("severity"),
        pl.lit("job").alias("subject_kind"),
        pl.col("job_id").alias("subject_id"),
        pl.col("start_ts").alias("anchor_ts"),
        pl.lit(None, pl.String).alias("node"),
        pl.lit(None, pl.String).alias("gpu_uuid"),
        pl.lit(False).alias("predicted"),
        (1 - pl.col("mfu") / t.mfu_max).clip(0, 1).cast(pl.Float32).alias("score"),
        saved.alias("gpu_h_at_stake"),
        pl.format(
            "Job {} ({}): {}% MFU on {} GPUs for {} h ({} tokens/s per GPU, {} B parameters); "
            "at {}% the same tokens would take {} fewer GPU-h — look at its input pipeline, "
            "batch size and communication (gpuledger job {})",
            "job_id",
            pl.col("user").fill_null("unknown user"),
            (pl.col("mfu") * 100).round(1),
            "gpus",
            pl.col("hours").round(1),
            pl.col("tokens_per_s_per_gpu").round(0).cast(pl.Int64),
            (pl.col("model_params") / 1e9).round(2),
            round(t.mfu_max * 100, 1),
            saved.round(1),
            "job_id",
        ).alias("message"),
        evidence("mfu", "tokens_per_s_per_gpu", "model_params", "gpus", "hours", "model", "fix"),
    ).pipe(as_frame)


RULES = (Rule("mfu", QUERY, _params, _low_mfu),)
