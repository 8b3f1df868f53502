"""The bench's scenario names, apart from app/bench/run.py so that `gpuledger --help` (which
lists them as --scenario's choices) does not import the bench."""

from __future__ import annotations

__all__ = ["DEFAULT_SCENARIOS", "SCENARIOS"]

SCENARIOS = (
    "attribution",
    "incremental",
    "dashboard",
    "scale",
    "prometheus",
    "replay",
    "jobstats",
    "history",
)
DEFAULT_SCENARIOS = ("attribution", "incremental", "dashboard", "prometheus")
