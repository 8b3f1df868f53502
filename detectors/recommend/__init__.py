"""Scheduler-policy recommendations with evidence replayed from the lake's history.

`run.recommend(con, config, now)` returns rows of the `recommendations` table (DESIGN §3.5), one
module per kind; each row carries quantified `evidence` (JSON), `expected_gain_gpu_h`, `risk`
and `config`: the exact sacctmgr/scontrol commands and slurm.conf lines (target `slurm`) or
Kueue YAML (target `kueue`, for clusters whose jobs come from Kubernetes).

This package's own names are the light ones a configuration is checked against (the kinds,
their thresholds): importing it loads neither polars nor a recommender.
"""

from __future__ import annotations

from detectors.recommend.config import KIND_FIELDS, RecommendConfig

__all__ = ["KIND_FIELDS", "RecommendConfig"]
