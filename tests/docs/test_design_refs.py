"""Every "DESIGN §n" or "DESIGN §n.m" the code cites is a section heading of docs/design.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
CITE = re.compile(r"DESIGN(?:\.md)? §(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)?)\.? ", re.M)


def cited() -> dict[str, list[str]]:
    """Section → where it is cited, over every tracked file but the design itself."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    found: dict[str, list[str]] = {}
    for name in files:
        path = ROOT / name.decode()
        if not name or path == DESIGN or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in CITE.finditer(text):
            found.setdefault(match.group(1), []).append(name.decode())
    return found


def headings() -> set[str]:
    return set(HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def test_every_design_section_the_code_cites_is_a_heading_of_docs_design():
    refs = cited()
    assert len(refs) >= 10, "the code's DESIGN references were not found"
    missing = {sec: where[:3] for sec, where in refs.items() if sec not in headings()}
    assert not missing, f"DESIGN sections cited but not in docs/design.md: {missing}"


def test_the_headings_are_parsed_as_the_code_numbers_them():
    assert {"1", "3", "3.1", "3.5", "4", "4.1", "5", "7"} <= headings()
    # a top-level number is its own section, not a prefix of a subsection
    assert not HEADING.search("### 3.10x heading\n")
