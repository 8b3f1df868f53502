"""Options and parameter types every `gpuledger` command shares (lake, timestamps, progress)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["LAKE_HELP", "Timestamp", "lake_option", "progress_bar"]

F = TypeVar("F", bound=Callable[..., Any])
LAKE_HELP = "Lake root folder (default: $GPULEDGER_LAKE, else ./lake)."


def lake_option(func: F) -> F:
    """`--lake DIR`, from $GPULEDGER_LAKE when not given, else ./lake (DESIGN §3)."""
    return click.option(
        "--lake",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="GPULEDGER_LAKE",
        default=Path("lake"),
        show_default=True,
        help=LAKE_HELP,
    )(func)


@contextmanager
def progress_bar(
    label: str, total: int, enabled: bool = True
) -> Iterator[Callable[[int, int], None]]:
    """A click progress bar on stderr, driven by `(done, total)` callbacks."""
    if not enabled:
        yield lambda done, total: None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True) as bar:
        last = [0]

        def update(done: int, _total: int) -> None:
            bar.update(done - last[0])
            last[0] = done

        yield update


class Timestamp(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """An ISO date or date-time, taken as UTC when no offset is given."""

    name = "timestamp"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> dt.datetime:
        if isinstance(value, dt.datetime):
            return value
        try:
            parsed = dt.datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO date or date-time (e.g. 2026-11-02 or 2026-11-02T08:00)"
            )
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
