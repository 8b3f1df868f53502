"""Options and parameter types every `gpuledger` command shares (lake, timestamps, progress)."""

from __future__ import annotations

import datetime as dt
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from warehouse.layout import MAX_CLUSTER_NAME

if TYPE_CHECKING:
    from warehouse.lake import Lake


__all__ = [
    "LAKE_HELP",
    "ClusterName",
    "Finite",
    "NonEmptyPath",
    "Timestamp",
    "lake_option",
    "lake_writer",
    "no_wait_option",
    "progress_bar",
]

F = TypeVar("F", bound=Callable[..., Any])
LAKE_HELP = (
    "Lake root folder (default: $GPULEDGER_LAKE, else the configuration file's `lake`, "
    "else ./lake)."
)


def _configured_lake(ctx: click.Context, param: click.Parameter, value: Path | None) -> Lake:
    """--lake as given, else $GPULEDGER_LAKE, else the configuration's `lake`, else ./lake:
    the same root `gpuledger run`, `report` and the dashboard use (DESIGN §7). The command
    gets the `Lake` there, built once here."""
    from warehouse.lake import Lake

    if value is not None:
        return Lake.at(value)
    if any(p.name == "config_path" for p in ctx.command.params):
        return Lake.at("lake")  # such a command reads its own --config and takes `lake` from it
    from app.config import ConfigError, LakeConfig, load_section

    try:  # [lake] alone: a command that reads other sections loads them itself
        return Lake.at(load_section(LakeConfig).root)
    except ConfigError as err:
        raise click.BadParameter(
            f"not given, and the configuration that would name it is not valid: {err}", ctx, param
        ) from None


class NonEmptyPath(click.Path):
    """A click.Path that refuses the empty text: Path("") is the current folder, and
    `report weekly --out ''` wrote its reports there (`--lake ''` landed a lake there)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:
            self.fail(
                "'' is an empty path; expected a path ('.' for the current folder)", param, ctx
            )
        return super().convert(value, param, ctx)


def lake_option(func: F) -> F:
    """`--lake DIR`, else $GPULEDGER_LAKE, else the configuration's `lake`, else ./lake: the
    command's `lake` parameter is that `Lake`."""
    return click.option(
        "--lake",
        type=NonEmptyPath(file_okay=False, path_type=Path),
        envvar="GPULEDGER_LAKE",
        default=None,
        callback=_configured_lake,
        help=LAKE_HELP,
    )(func)


def no_wait_option(func: F) -> F:
    """`--no-wait`: exit at once, naming the holder, when another writer holds the lake."""
    return click.option(
        "--no-wait",
        is_flag=True,
        help="If another gpuledger process is writing the lake's marts or findings (e.g. "
        "`gpuledger run`), exit at once with a line naming it instead of waiting for it.",
    )(func)


@contextmanager
def lake_writer(lake: Lake, step: str, no_wait: bool) -> Iterator[None]:
    """Hold the lake's writer lock (warehouse/writer_lock.py) for a command, telling stderr
    whom it waits for; with `no_wait`, fail at once naming the holder."""
    with lake.writer(step, wait=not no_wait, progress=lambda m: click.echo(m, err=True)):
        yield


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
    """An ISO date or date-time, taken as UTC when no offset is given, in the years 1970 to
    9998 (as `report --week`): a lake's times are epoch seconds and dates a day on either side
    (`detect --now 1900-01-01` stamped findings for good; `simulate --start 0001-01-01` landed
    files outside any date folder, and 9999-12-31 overflowed)."""

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
        if not 1970 <= parsed.year <= 9998:
            self.fail(f"{value!r}: expected a year from 1970 to 9998")
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class Finite(click.FloatRange):
    """A number in a range that is a number: click's FloatRange lets NaN through every bound
    (NaN compares false), and `--timeout nan` or `--cost-per-gpu-hour nan` then failed deep
    inside or wrote "$nan" into a report."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class ClusterName(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A cluster's name for `--cluster`: not empty (`job --cluster ''` looked the job up on
    every cluster, and said it was not in the lake) and at most MAX_CLUSTER_NAME characters."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            self.fail(f"{value!r}: a cluster name may not be empty", param, ctx)
        if len(text) > MAX_CLUSTER_NAME:
            self.fail(
                f"a cluster name of {len(text):,} characters is too long "
                f"(at most {MAX_CLUSTER_NAME}): {text[:20]!r}…",
                param,
                ctx,
            )
        return text
