"""The README and `detect --help` document every detector and every threshold."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from app.cli import cli
from detectors.rules import DETECTORS, FAMILIES
from detectors.rules.base import threshold_docs

README = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")


def test_every_detector_is_in_the_readme_and_the_help():
    help_text = CliRunner().invoke(cli, ["detect", "--help"]).output
    for name in DETECTORS:
        assert f"`{name}`" in README, name
        assert name in help_text, name


def test_every_threshold_is_in_the_readme_with_its_default():
    for kind in FAMILIES.values():
        for name, default, _, _ in threshold_docs(kind):
            assert f"| `{name}` | {default:g} |" in README, name
