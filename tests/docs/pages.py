"""The documentation the tests read: README.md and the docs site's hand-written pages.

Generated pages (the CLI and configuration references) are not files: the tests that need them
call `app.reference_docs`. Fragments in docs/_incoming/ (none at the moment) are not pages.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIPPED = ("_incoming", "hooks")


def pages() -> list[Path]:
    """README.md, then every Markdown page of docs/ in path order."""
    found = sorted(
        p for p in DOCS.rglob("*.md") if not set(p.relative_to(DOCS).parts) & set(SKIPPED)
    )
    assert len(found) > 15, "the docs pages were not found"
    return [ROOT / "README.md", *found]


def page(name: str) -> str:
    """One page's text, by its path under docs/ (`operations/deploy.md`)."""
    return (DOCS / name).read_text(encoding="utf-8")


def all_text() -> str:
    """README and every page, one after another."""
    return "\n".join(p.read_text(encoding="utf-8") for p in pages())


def where(path: Path) -> str:
    return str(path.relative_to(ROOT))
