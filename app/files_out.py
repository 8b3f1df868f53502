"""Tables written to a user's file with Python's own file calls, so that a file that cannot be
written (a full disk, a folder that is not there) raises OSError with the system's reason and
the path: polars' writers raised ComputeError "Invalid thrift: transport error" (Parquet) or an
OSError naming no file (CSV) for `--out /dev/full`, a traceback."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["write_csv", "write_parquet"]


def write_parquet(frame: pl.DataFrame, path: Path) -> None:
    """`frame` as a Parquet file at `path`."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    _write(path, buffer)


def write_csv(frame: pl.DataFrame, path: Path) -> None:
    """`frame` as a CSV file at `path`."""
    buffer = io.BytesIO()
    frame.write_csv(buffer)
    _write(path, buffer)


def _write(path: Path, buffer: io.BytesIO) -> None:
    """The bytes at `path`; an error of the write itself (a full disk) names the file too."""
    try:
        path.write_bytes(buffer.getbuffer())
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
