"""Typed errors of the collector layer."""

from __future__ import annotations

__all__ = ["CollectorError", "ConfigError", "MalformedSample"]


class CollectorError(Exception):
    """Base of every error a collector raises on purpose."""


class ConfigError(CollectorError):
    """A source or simulator was configured with a value it cannot use."""


class MalformedSample(CollectorError):
    """One input line or record could not be parsed (counted and skipped by runners)."""
