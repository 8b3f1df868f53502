"""Tables written to a user's file: a file that cannot be written is an OSError naming it
(main() says it in one line), not polars' ComputeError or an OSError that names no file."""

from __future__ import annotations

import errno
from pathlib import Path

import polars as pl
import pytest

from app.files_out import write_csv, write_parquet

FULL = Path("/dev/full")


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
@pytest.mark.parametrize("write", [write_csv, write_parquet])
def test_a_full_disk_is_an_oserror_naming_the_file(write):
    with pytest.raises(OSError) as raised:
        write(pl.DataFrame({"a": [1, 2]}), FULL)

    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(FULL)


@pytest.mark.parametrize(
    ("write", "read"), [(write_csv, pl.read_csv), (write_parquet, pl.read_parquet)]
)
def test_what_is_written_reads_back(tmp_path, write, read):
    frame = pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    write(frame, tmp_path / "t")

    assert read(tmp_path / "t").equals(frame)
