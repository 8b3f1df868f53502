"""Stream the Philly trace's `cluster_gpu_util` into `gpu_samples` batches, block by block.

Times are US-Pacific local time with an explicit `PDT` (UTC−7) or `PST` (UTC−8) suffix; the
suffix decides the offset, so the repeated hour of a DST change maps to two distinct UTC hours.
It never holds the whole file: pyarrow's CSV reader yields blocks, each turned into long rows.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from collector.errors import MalformedSample
from warehouse.arrow_arrays import TIMESTAMP

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["BLOCK_BYTES", "INTERVAL_S", "UtilStats", "open_text", "read_gpu_util"]

logger = logging.getLogger(__name__)

INTERVAL_S = 60.0  # one nvidia-smi utilisation average per GPU per minute
_TIME_RE = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} P[DS]T$"
_NUMBER_RE = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$"
_GPU_COLUMN = re.compile(r"^gpu(\d+)_util$")
_HOUR_MS = 3_600_000
# Batch ids depend on where blocks end: keep the block size fixed between imports of one trace.
BLOCK_BYTES = 4 << 20
DAMAGED = "\ufffd"  # what a byte sequence that is not UTF-8 reads as
_EXAMPLES = 5


@dataclass(slots=True)
class UtilStats:
    """What a pass over `cluster_gpu_util` saw; filled in while batches are yielded.

    `extra_gpus` maps a machine to 1 + the highest GPU index that held a valid value beyond the
    GPU count it was given (evidence that the machine list under-counts it).
    """

    lines: int = 0
    malformed: int = 0
    invalid_values: int = 0
    samples: int = 0
    examples: list[str] = field(default_factory=list)
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)  # machine -> first/last ms
    extra_gpus: dict[str, int] = field(default_factory=dict)

    def skip(self, count: int, example: str) -> None:
        self.malformed += count
        if len(self.examples) < _EXAMPLES:
            self.examples.append(example)


def open_text(path: Path) -> TextIO:
    """Open a trace file as text, through gzip when its name ends in `.gz`.

    Bytes that are not UTF-8 read as U+FFFD (DAMAGED), so the line holding them is skipped
    and counted as malformed rather than ending the import. A byte-order mark at the start (a
    file saved by a spreadsheet or a Windows editor) is not part of the text.
    """
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="")
    return open(path, encoding="utf-8-sig", errors="replace", newline="")


class _ReplacingUtf8(io.RawIOBase):
    """A binary stream of `source`'s bytes with every sequence that is not UTF-8 replaced by
    U+FFFD (DAMAGED), so the CSV reader sees one malformed line instead of failing the file.
    Decodes incrementally: a sequence cut by a chunk boundary is joined, not replaced."""

    def __init__(self, source: io.BufferedIOBase, chunk_bytes: int = 1 << 20) -> None:
        super().__init__()
        self._source = source
        self._chunk_bytes = chunk_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        while not self._pending:
            chunk = self._source.read(self._chunk_bytes)
            self._pending = memoryview(self._decoder.decode(chunk, final=not chunk).encode())
            if not chunk:
                break
        out = memoryview(buffer).cast("B")
        n = min(len(out), len(self._pending))
        out[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def _header(path: Path) -> tuple[int, bool]:
    """Return (GPU columns, whether data rows end with a trailing comma) from the first lines."""
    try:
        with open_text(path) as handle:
            rows = csv.reader(handle)
            header = next(rows, None)
            firsts = [row for _, row in zip(range(10), rows, strict=False)]
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise MalformedSample(f"{path}: cannot read its first lines: {exc}") from exc
    names = [n.strip() for n in header or []]
    while names and names[-1] == "":
        names.pop()
    gpus = [int(m.group(1)) for n in names[2:] if (m := _GPU_COLUMN.match(n))]
    if len(names) < 3 or names[0] != "time" or gpus != list(range(len(names) - 2)):
        raise MalformedSample(
            f"{path}: expected a header like 'time,machineId,gpu0_util,...,gpu7_util', "
            f"got {','.join(names)!r}"
        )
    # Most rows end with a comma in the trace; decide by the first few rows, not only the first.
    ends = sum(1 for row in firsts if len(row) == len(names) + 1 and row[-1] == "")
    return len(gpus), ends * 2 > len(firsts)


def _lenient(text: str, gpus: int) -> list[str] | None:
    """Fields of a row the block reader refused, when it is only missing its trailing comma."""
    fields = next(csv.reader([text]), [])
    if len(fields) == gpus + 3 and fields[-1] == "":
        fields = fields[:-1]
    return fields if len(fields) == gpus + 2 else None


def _parse_values(column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, int]:
    """Percent values as float32: empty/`NA` (already null), non-numbers and values outside
    0–100 (the trace writes -1.0 where it has no reading) become null; return them and how many
    were neither empty nor valid."""
    text = pc.utf8_trim_whitespace(column)
    numeric = pc.match_substring_regex(text, _NUMBER_RE)
    values = pc.cast(pc.if_else(numeric, text, pa.scalar(None, pa.string())), pa.float64())
    valid = pc.and_(pc.greater_equal(values, 0.0), pc.less_equal(values, 100.0))
    kept = pc.if_else(valid, values, pa.scalar(None, pa.float64()))
    invalid = int(pc.sum(pc.and_(pc.is_valid(text), pc.invert(pc.fill_null(valid, False)))).as_py())
    return pc.cast(kept, pa.float32()), invalid


def _to_long(
    wide: pa.Table, cluster: str, gpus: int, counts: dict[str, int], stats: UtilStats
) -> pa.Table:
    """Turn wide rows (time, machine, gpu0..) into one gpu_samples row per machine-minute-GPU.

    A row is landed for each GPU's valid value (0-100) alone. A cell with no value (empty, NA,
    or the trace's -1.0 for no reading) is no observation: a row for it said the GPU was
    watched over that minute, and the marts count a sample with no activity field as active
    (a job whose GPUs never reported was advised to ask for exactly those). Like a missed
    scrape, the minute is unobserved; the sample before stands for it (DESIGN §4, up to two
    intervals). Values at an index beyond the machine's listed count are counted in `stats`.
    """
    time = pc.utf8_trim_whitespace(wide.column("time"))
    local = pc.strptime(
        pc.utf8_slice_codeunits(time, 0, 19),
        format="%Y-%m-%d %H:%M:%S",
        unit="ms",
        error_is_null=True,
    )
    offset = pc.if_else(
        pc.equal(pc.utf8_slice_codeunits(time, 20, 23), "PST"), 8 * _HOUR_MS, 7 * _HOUR_MS
    )
    ts = pc.add(pc.cast(local, pa.int64()), offset)
    machine = pc.utf8_trim_whitespace(wide.column("machine"))
    ok = pc.and_(
        pc.and_(pc.match_substring_regex(time, _TIME_RE), pc.is_valid(local)),
        pc.and_(
            pc.greater(pc.utf8_length(machine), 0),
            pc.invert(pc.match_substring(machine, DAMAGED)),  # a name cut by a bad byte
        ),
    )
    if "_trailing" in wide.column_names:
        ok = pc.and_(ok, pc.is_null(wide.column("_trailing")))
    ok = pc.fill_null(ok, False)
    bad = wide.num_rows - int(pc.sum(ok).as_py() or 0)
    if bad:
        shown = wide.filter(pc.invert(ok)).slice(0, _EXAMPLES).to_pylist()
        for row in shown:
            cells = ",".join("" if v is None else v for v in row.values())
            stats.skip(
                1,
                "cluster_gpu_util: expected a time like '2017-10-03 00:08:00 PDT' (PDT/PST),"
                f" a machine and an empty last field, got {cells!r}",
            )
        stats.malformed += bad - len(shown)
    wide, ts, machine = wide.filter(ok), ts.filter(ok), machine.filter(ok)
    if wide.num_rows == 0:
        return pa.table({})
    spans = pa.table({"m": machine, "ts": ts}).group_by("m").aggregate([("ts", "min_max")])
    for row in spans.to_pylist():
        lo, hi = row["ts_min_max"]["min"], row["ts_min_max"]["max"]
        old = stats.seen.get(row["m"])
        stats.seen[row["m"]] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    names = pa.array(list(counts), pa.string())
    known = pc.take(
        pa.array(list(counts.values()), pa.int32()), pc.index_in(machine, value_set=names)
    )
    known = pc.fill_null(known, 0)
    parts = []
    for i in range(gpus):
        values, invalid = _parse_values(wide.column(f"gpu{i}"))
        stats.invalid_values += invalid
        keep = pc.is_valid(values)
        beyond = pc.and_(pc.less_equal(known, i), keep)
        for m in pc.unique(machine.filter(beyond)).to_pylist():
            stats.extra_gpus[m] = max(stats.extra_gpus.get(m, 0), i + 1)
        parts.append(
            pa.table(
                {
                    "ts": pc.cast(ts.filter(keep), TIMESTAMP),
                    "node": machine.filter(keep),
                    "gpu_index": pa.repeat(pa.scalar(i, pa.int16()), int(pc.sum(keep).as_py())),
                    "gpu_util_pct": values.filter(keep),
                }
            )
        )
    long = pa.concat_tables(parts).combine_chunks()
    n = long.num_rows
    return (
        long.append_column("cluster", pa.repeat(pa.scalar(cluster), n))
        .append_column("interval_s", pa.repeat(pa.scalar(INTERVAL_S, pa.float32()), n))
        .append_column("source", pa.repeat(pa.scalar("philly"), n))
    )


def read_gpu_util(
    path: Path,
    cluster: str,
    counts: dict[str, int],
    stats: UtilStats,
    *,
    lines_per_batch: int = 200_000,
    block_bytes: int = BLOCK_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[pa.Table]:
    """Yield gpu_samples tables of about `lines_per_batch` input lines each, in file order.

    `counts` gives each machine's GPU count. Malformed lines are skipped and counted in `stats`
    (never raised); lines only missing their trailing comma are read anyway and landed in the
    last batch, so what each batch holds depends on the file alone. `progress(done, total)`
    reports bytes of `path` read.
    """
    gpus, trailing = _header(path)
    columns = ["time", "machine", *(f"gpu{i}" for i in range(gpus))]
    columns += ["_trailing"] if trailing else []
    lenient: list[list[str]] = []

    def on_invalid(row: pcsv.InvalidRow) -> str:
        stats.lines += 1
        fields = _lenient(row.text, gpus)
        if fields is None:
            stats.skip(
                1,
                f"cluster_gpu_util line {row.number}: expected {len(columns)} fields, "
                f"got {row.actual_columns}: {row.text[:80]!r}",
            )
        else:
            lenient.append(fields + ([""] if trailing else []))
        return "skip"

    total = path.stat().st_size
    raw = open(path, "rb")  # noqa: SIM115 - closed below; its position is the progress
    source: io.BufferedIOBase = gzip.GzipFile(fileobj=raw) if path.name.endswith(".gz") else raw
    stream = _ReplacingUtf8(source)
    pending: list[pa.Table] = []
    pending_lines = 0
    try:
        reader = pcsv.open_csv(
            stream,
            read_options=pcsv.ReadOptions(
                use_threads=False, block_size=block_bytes, skip_rows=1, column_names=columns
            ),
            parse_options=pcsv.ParseOptions(invalid_row_handler=on_invalid),
            convert_options=pcsv.ConvertOptions(
                column_types={c: pa.string() for c in columns},
                null_values=["", "NA"],
                strings_can_be_null=True,
            ),
        )
        for block in reader:
            stats.lines += block.num_rows
            pending.append(_to_long(pa.Table.from_batches([block]), cluster, gpus, counts, stats))
            pending_lines += block.num_rows
            if pending_lines >= lines_per_batch:
                batch = _flush(pending, stats)
                pending, pending_lines = [], 0
                if batch.num_rows:
                    yield batch
            if progress:
                progress(raw.tell(), total)
    except (pa.ArrowInvalid, OSError, EOFError) as exc:
        raise MalformedSample(f"{path}: cannot read past byte {raw.tell()}: {exc}") from exc
    finally:
        raw.close()
    if lenient:
        cells = [
            [None if r[k] in ("", "NA") else r[k] for r in lenient] for k in range(len(columns))
        ]
        wide = pa.table({c: pa.array(cells[k], pa.string()) for k, c in enumerate(columns)})
        pending.append(_to_long(wide, cluster, gpus, counts, stats))
    last = _flush(pending, stats)
    if last.num_rows:
        yield last
    if progress:
        progress(total, total)
    if stats.malformed:
        logger.warning("cluster_gpu_util: skipped %d malformed lines", stats.malformed)


def _flush(pending: list[pa.Table], stats: UtilStats) -> pa.Table:
    tables = [t for t in pending if t.num_rows]
    if not tables:
        return pa.table({})
    table = pa.concat_tables(tables).combine_chunks()
    stats.samples += table.num_rows
    return table
