"""Every shipped query as a `.sql` file (DuckDB dialect), and the loader that finds them by name.

A query's name is its path under this package without the suffix: `sql/marts/job_usage.sql` is
`"marts/job_usage"`. This package imports nothing of ours and executes nothing.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

__all__ = ["UnknownQuery", "load", "names"]


class UnknownQuery(LookupError):
    """No shipped SQL file has the requested name."""


def _walk(folder: Traversable, prefix: str) -> list[str]:
    found: list[str] = []
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.name.startswith("__"):
            found.extend(_walk(entry, f"{prefix}{entry.name}/"))
        elif entry.name.endswith(".sql"):
            found.append(prefix + entry.name.removesuffix(".sql"))
    return found


@cache
def names() -> tuple[str, ...]:
    """Return the names of every shipped query, sorted."""
    return tuple(sorted(_walk(files(__name__), "")))


@cache
def load(name: str) -> str:
    """Return the text of sql/<name>.sql, e.g. load("marts/job_usage")."""
    path = files(__name__).joinpath(*f"{name}.sql".split("/"))
    if not path.is_file():
        raise UnknownQuery(f"No SQL file named {name!r}; known: {', '.join(names())}")
    return path.read_text(encoding="utf-8")
