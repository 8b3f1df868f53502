"""One pipeline round and its one configuration (see `round` and `settings`).

`pipeline_config(load_config(path), **flags)` builds the frozen `PipelineConfig`; `attribute`,
`detect` and `compact` run the steps with it. Every command that runs part of a round goes
through here, so the same configuration gives the same marts and findings everywhere.
"""

from __future__ import annotations

from app.pipeline.round import (
    FINDING_PRODUCERS,
    AttributeOutcome,
    DetectOutcome,
    attribute,
    compact,
    detect,
    rule_findings,
    scope_findings,
)
from app.pipeline.settings import PipelineConfig, default_pipeline_config, pipeline_config

__all__ = [
    "FINDING_PRODUCERS",
    "AttributeOutcome",
    "DetectOutcome",
    "PipelineConfig",
    "attribute",
    "compact",
    "default_pipeline_config",
    "detect",
    "pipeline_config",
    "rule_findings",
    "scope_findings",
]
