"""The docs' Detectors page and `detect --help` document every detector and every threshold."""

from __future__ import annotations

from click.testing import CliRunner

from app.cli import cli
from detectors.rules import DETECTORS, FAMILIES
from detectors.rules.base import threshold_docs
from tests.docs.pages import page

DETECTORS_PAGE = page("detectors.md")


def test_every_detector_is_on_the_detectors_page_and_in_the_help():
    help_text = CliRunner().invoke(cli, ["detect", "--help"]).output
    for name in DETECTORS:
        assert f"`{name}`" in DETECTORS_PAGE, name
        assert name in help_text, name


def test_every_threshold_is_on_the_detectors_page_with_its_default():
    for kind in FAMILIES.values():
        for name, default, _, _ in threshold_docs(kind):
            assert f"| `{name}` | {default:g} |" in DETECTORS_PAGE, name
