"""Land Arrow batches in the lake: validated, partitioned, atomic and idempotent.

A batch is identified by a `batch_id` that names its source window (e.g. `sim-s42-2026-01-05` or a
hash of a Prometheus query window). Each partition it touches gets one file named after it, written
to a temporary name, fsynced and renamed, so a reader never sees half a file and re-landing the same
window replaces the file instead of adding rows. Every file carries a `_batch` column (ignored by
views) so that compaction can merge files and a later re-landing can still replace its own rows.
"""

from __future__ import annotations

import array
import contextlib
import datetime as dt
import hashlib
import itertools
import logging
import os
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warehouse import compaction_log, intents, layout
from warehouse.arrow_arrays import (
    float64s,
    read_parquet,
    repeated_string,
    string_scalar,
    strings,
)
from warehouse.errors import NotWritable, SchemaMismatch
from warehouse.schema import ALLOWED_VALUES, RAW_TABLES, TableSpec, spec

__all__ = [
    "BATCH_COLUMN",
    "COMPACT_MAX_BYTES",
    "COMPACT_MIN_FILES",
    "atomic_write",
    "compact",
    "compact_closed_days",
    "conform",
    "foreign_file",
    "recover",
    "replace_partition",
    "replace_partitions",
    "retract_batches",
    "write_batch",
    "write_empty",
]

logger = logging.getLogger(__name__)

BATCH_COLUMN = "_batch"
_BATCHES_KEY = b"gpuledger.batches"
# an Arrow scalar: a compute function given a Python value loads pandas (arrow_arrays.py)
_MS_PER_DAY = float64s([86_400_000.0])[0]
_EPOCH = dt.date(1970, 1, 1)
_ROW_GROUP = 256_000


def conform(table_spec: TableSpec, batch: pa.Table | pa.RecordBatch) -> pa.Table:
    """Return `batch` with exactly the contract's columns, in order, or raise SchemaMismatch.

    Missing nullable columns are added as nulls (a source that lacks a field writes null, never 0).
    A column of another type, an unknown column, a missing required column or a null in a required
    column is refused with a message naming the field (and both types), and so is a value of an
    enum column outside the contract's set (`ALLOWED_VALUES`, e.g. `job_gpus.mapping`).
    """
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    expected = table_spec.schema
    unknown = [n for n in table.column_names if expected.get_field_index(n) < 0]
    if unknown:
        raise SchemaMismatch(
            f"{table_spec.name}: unknown column(s) {unknown!r}; expected {expected.names!r}"
        )
    columns = []
    for field in expected:
        if field.name not in table.column_names:
            if not field.nullable:
                raise SchemaMismatch(f"{table_spec.name}: required column {field.name!r} missing")
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        if column.type != field.type:
            raise SchemaMismatch(
                f"{table_spec.name}.{field.name}: got type {column.type}, expected {field.type}"
            )
        if not field.nullable and column.null_count:
            raise SchemaMismatch(
                f"{table_spec.name}.{field.name}: {column.null_count} null value(s) "
                "in a required column"
            )
        allowed = ALLOWED_VALUES.get(table_spec.name, {}).get(field.name)
        if allowed is not None:
            _check_values(table_spec.name, field.name, column, allowed)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=expected)


def _check_values(
    table: str, column_name: str, column: pa.ChunkedArray, allowed: frozenset[str]
) -> None:
    """Raise SchemaMismatch naming the values of `column` outside the contract's set."""
    known = strings(sorted(allowed))
    outside = pc.and_(pc.is_valid(column), pc.invert(pc.is_in(column, value_set=known)))
    if not pc.any(outside).as_py():
        return
    bad = sorted(pc.unique(column.filter(outside)).to_pylist())
    raise SchemaMismatch(
        f"{table}.{column_name}: value(s) {bad!r} not in the contract's set; "
        f"expected one of {sorted(allowed)!r}"
    )


def _partition_keys(table_spec: TableSpec, table: pa.Table) -> pa.Table:
    """Add `__date` (days since epoch, or -1 for date-less tables) for partitioning."""
    if table_spec.date_column is None:
        days = pa.Array.from_buffers(
            pa.int32(),
            table.num_rows,
            [None, pa.py_buffer(array.array("i", [-1]) * table.num_rows)],
        )
    else:
        values = table.column(table_spec.date_column)
        if pa.types.is_date32(values.type):
            days = pc.cast(values, pa.int32())
        else:
            if values.null_count and "updated_ts" in table.column_names:
                values = pc.coalesce(values, table.column("updated_ts"))
            if values.null_count:
                raise SchemaMismatch(
                    f"{table_spec.name}.{table_spec.date_column}: null values cannot be placed in "
                    "a date partition"
                )
            ms = pc.cast(pc.cast(values, pa.timestamp("ms")), pa.int64())
            days = pc.cast(pc.floor(pc.divide(pc.cast(ms, pa.float64()), _MS_PER_DAY)), pa.int32())
    return table.append_column("__date", days)


def _day(days: int) -> dt.date | None:
    return None if days < 0 else _EPOCH + dt.timedelta(days=days)


def atomic_write(table: pa.Table, path: Path, batches: Iterable[str] | None) -> None:
    """Write `table` to `path` via a temporary file, fsync, rename, fsync of the folder.

    `batches` is recorded in the file's metadata; None keeps what `table` already carries.
    """
    meta = dict(table.schema.metadata or {})
    if batches is not None:
        meta[_BATCHES_KEY] = ",".join(sorted(set(batches))).encode()
    _write_atomically(table.schema.with_metadata(meta), [table], path, split_floats=False)


def _encodings(schema: pa.Schema, *, split_floats: bool) -> dict[str, list[str] | bool]:
    """The Parquet encodings a lake file of `schema` is written with.

    Every column is dictionary-encoded by default: besides compressing the few distinct values
    of keys, labels and many readings, a dictionary lets a reader see a damaged data page (an
    index out of range: DamagedFile names the file) where plainly encoded floats read as other
    numbers. `split_floats` (the day partitions of the sample-level marts, rebuilt from the raw
    files, whose floats were written plain before): float columns are split into byte
    streams, which zstd compresses better and faster than plain floats; the rest keep
    dictionaries (measured in docs/benchmarks.md).
    """
    if not split_floats:
        return {"use_dictionary": True}
    floats = [f.name for f in schema if pa.types.is_floating(f.type)]
    others = [f.name for f in schema if not pa.types.is_floating(f.type)]
    return {"use_dictionary": others, "use_byte_stream_split": floats}


def _write_atomically(
    schema: pa.Schema, chunks: Iterable[pa.Table], path: Path, *, split_floats: bool
) -> int:
    """Write `chunks` (of `schema`, metadata included) to `path` as atomic_write does, one row
    group of at most _ROW_GROUP rows at a time; return the rows written."""
    layout.ensure_dir(path.parent)
    tmp = path  # until the temporary file exists
    rows = 0
    try:
        fd, tmp = layout.create_temp(path)
        with os.fdopen(fd, "wb") as handle:
            with pq.ParquetWriter(
                handle, schema, compression="zstd", **_encodings(schema, split_floats=split_floats)
            ) as writer:
                for chunk in chunks:
                    writer.write_table(chunk, _ROW_GROUP)
                    rows += chunk.num_rows
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # no space, no permission, a name too long: the old file stays
        raise NotWritable(path, exc, "write") from exc
    finally:
        if tmp != path:  # (equal only when it could not be made: the old file must stay)
            with contextlib.suppress(OSError):  # renamed into place already
                tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return rows


def _batches_in(path: Path) -> set[str]:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(_BATCHES_KEY, b"")
    return {b for b in raw.decode().split(",") if b}


def _holders(partition: Path, batch_id: str, keep: Path) -> list[Path]:
    """The files of `partition` other than `keep` that hold rows of `batch_id` (compacted ones)."""
    return [
        other
        for other in sorted(partition.glob("*.parquet"))
        if other != keep and not other.name.startswith(".") and batch_id in _batches_in(other)
    ]


def _evict(holders: list[Path], batch_id: str) -> None:
    """Remove the rows of `batch_id` from `holders` (after it landed again in its own file)."""
    for other in holders:
        rows = read_parquet(other)
        # Rows from files of other tools have a null `_batch`: they belong to no batch, keep them.
        column = rows.column(BATCH_COLUMN)
        others = pc.or_kleene(pc.not_equal(column, string_scalar(batch_id)), pc.is_null(column))
        remaining = rows.filter(others)
        if remaining.num_rows:
            atomic_write(remaining, other, _batches_in(other) - {batch_id})
        else:
            other.unlink()


def _land(folder: Path, part: pa.Table, path: Path, batch_id: str) -> None:
    """Write `part` as batch `batch_id`'s file `path`, its rows leaving any file that held them
    before; a crash between the two is finished by `_recover` (warehouse/intents.py)."""
    _recover(folder)
    holders = _holders(folder, batch_id, keep=path)
    if not holders:
        atomic_write(part, path, [batch_id])
        return
    others = tuple(intents.stat_of(h) for h in holders)
    intent = intents.record(folder, intents.Intent("reland", path.name, others, batch_id))
    atomic_write(part, path, [batch_id])
    _evict(holders, batch_id)
    intents.clear(intent)


def _recover(folder: Path) -> int:
    """Finish the changes of `folder`'s files that a crash left recorded; return how many.

    A merge whose file was renamed into place loses its sources (those still as recorded); a
    batch whose new file landed has its rows evicted from the files that still hold them. A
    change that never reached its first rename leaves the files as they were: only its record
    goes.
    """
    done = 0
    for path, intent in intents.pending(folder):
        if intent is None or intent.kind not in ("merge", "reland"):
            logger.warning("%s: not an intent this version knows; left as is", path)
            continue
        target = folder / intent.target
        if intent.kind == "merge":
            if target.exists() and intents.stat_of(target) not in intent.others:
                for name, size, mtime_ns in intent.others:
                    source = folder / name
                    with contextlib.suppress(FileNotFoundError):
                        if source != target and intents.stat_of(source) == (name, size, mtime_ns):
                            source.unlink()
        elif target.exists():
            _evict(_holders(folder, intent.batch, keep=target), intent.batch)
        logger.warning("%s: finished a %s left half done", folder, intent.kind)
        intents.clear(path)
        done += 1
    return done


def recover(root: Path) -> int:
    """Finish every change of a raw table's partition that a crash left half done (see
    warehouse/intents.py); return how many. Run before building marts over the raw tables."""
    done = 0
    for table in RAW_TABLES:
        folder = layout.table_dir(root, table)
        if not folder.is_dir():
            continue
        for parent, _dirs, names in os.walk(folder):
            if any(name.startswith(intents.PREFIX) for name in names):
                with layout.table_lock(root, table):
                    done += _recover(Path(parent))
    return done


def write_batch(
    root: Path, table: str, batch: pa.Table | pa.RecordBatch, batch_id: str
) -> list[Path]:
    """Validate `batch` against `table`'s contract and land it; return the files written.

    Landing the same `batch_id` again replaces what it landed before, so retrying a source
    window never duplicates rows.
    """
    table_spec = spec(table)
    conformed = conform(table_spec, batch)
    if conformed.num_rows == 0:
        return []
    batch_id = layout.safe_name(batch_id)
    keyed = _partition_keys(table_spec, conformed)
    clusters = sorted(pc.unique(keyed.column("cluster")).to_pylist())
    written = []
    for cluster in clusters:
        layout.claim_cluster_folder(root, cluster)  # `gpu farm` and `gpu_farm`: one error
    with layout.table_lock(root, table):  # a compaction of the table waits, and is waited for
        for cluster in clusters:
            of_cluster = keyed  # one cluster and one day, the usual batch: no copy of it
            if len(clusters) > 1:
                of_cluster = keyed.filter(pc.equal(keyed.column("cluster"), string_scalar(cluster)))
            # Arrow scalars, compared as they are (a Python value would load pandas)
            days = pc.unique(of_cluster.column("__date")).sort()
            for day in days:
                part = of_cluster
                if len(days) > 1:
                    part = of_cluster.filter(pc.equal(of_cluster.column("__date"), day))
                part = part.drop_columns(["__date"])
                part = part.append_column(BATCH_COLUMN, repeated_string(batch_id, part.num_rows))
                folder = layout.partition_dir(root, table, cluster, _day(day.as_py()))
                path = layout.batch_path(folder, batch_id)
                _land(folder, part, path, batch_id)
                written.append(path)
    return written


def foreign_file(root: Path, table: str, cluster: str, prefix: str) -> Path | None:
    """The first file of `table`'s partitions of `cluster` that holds rows of a batch whose id
    does not start with `prefix` (another source's), or of no batch (another tool's file);
    None where every row is of such batches (or there is none)."""
    prefix = layout.safe_name(prefix)
    for path in layout.folder_files(layout.partition_dir(root, table, cluster, None)):
        batches = _batches_in(path)
        if not batches or any(not b.startswith(prefix) for b in batches):
            return path
    return None


def retract_batches(
    root: Path, table: str, cluster: str, prefix: str, keep: Collection[Path]
) -> int:
    """Remove from `table`'s partitions of `cluster` the rows of every batch whose id starts
    with `prefix`, except each batch in the partition `keep` (the files a whole re-import has
    just landed) holds it in: an import that lands fewer days or batches than the last one
    leaves none of the last one's rows behind. A batch kept is kept in its partition whatever
    file holds it by now (a compaction may have merged it). Run after the import landed whole;
    a crash before it leaves the last import's rows, and one part way through (a table or a
    partition at a time) leaves some: the next import retracts them. Returns how many files
    changed.
    """
    prefix = layout.safe_name(prefix)
    kept = {(path.parent.resolve(), path.stem) for path in keep}
    changed = 0
    folder = layout.partition_dir(root, table, cluster, None)
    with layout.table_lock(root, table):
        for path in layout.folder_files(folder):
            partition = path.parent.resolve()
            stale = sorted(
                b for b in _batches_in(path) if b.startswith(prefix) and (partition, b) not in kept
            )
            if not stale:
                continue
            _recover(path.parent)
            for batch_id in stale:
                if path.exists():
                    _evict([path], batch_id)
            changed += 1
    return changed


def replace_partitions(
    root: Path, table: str, batch: pa.Table, cluster: str, batch_id: str = "mart"
) -> list[Path]:
    """Replace every partition of `table` for `cluster` by `batch` (marts are rebuilt whole).

    New files are renamed into place first; partitions that no longer have rows are removed
    after, so a reader sees either the old or the new rows of each partition.
    """
    batch = conform(spec(table), batch)
    others = sorted(set(pc.unique(batch.column("cluster")).to_pylist()) - {cluster})
    if others:
        raise SchemaMismatch(
            f"{table}: rebuilding cluster {cluster!r} but the batch has rows of {others!r}"
        )
    written = write_batch(root, table, batch, batch_id)
    base = layout.table_dir(root, table) / f"cluster={layout.safe_name(cluster)}"
    keep = set(written)
    for path in layout.table_files(root, table):
        if path not in keep and base in path.parents:
            path.unlink()
    return written


def replace_partition(
    root: Path,
    table: str,
    batch: pa.Table | pa.RecordBatchReader,
    cluster: str,
    date: dt.date,
    batch_id: str = "mart",
) -> int:
    """Replace the one (cluster, date) partition of a mart by `batch`; other partitions stay.
    Return the rows written.

    `batch` must hold only rows of that partition (the caller built it for that day, so the
    rows are not split again); an empty batch removes the partition. A RecordBatchReader is
    streamed to the file a row group at a time, never held whole.
    """
    table_spec = spec(table)
    layout.claim_cluster_folder(root, cluster)
    folder = layout.partition_dir(root, table, cluster, date)
    batch_id = layout.safe_name(batch_id)
    path = layout.batch_path(folder, batch_id)
    schema = table_spec.schema.append(pa.field(BATCH_COLUMN, pa.string()))
    schema = schema.with_metadata({_BATCHES_KEY: batch_id.encode()})

    def chunks() -> Iterator[pa.Table]:
        for rows in _row_groups(batch):
            conformed = conform(table_spec, rows)
            yield conformed.append_column(
                BATCH_COLUMN, repeated_string(batch_id, conformed.num_rows)
            )

    chunked = chunks()
    first = next((c for c in chunked if c.num_rows), None)
    written = 0
    if first is not None:
        # the sample-level marts' floats: sums, nearly all distinct (see `_encodings`)
        written = _write_atomically(
            schema, itertools.chain([first], chunked), path, split_floats=True
        )
    if folder.is_dir():
        for other in folder.glob("*.parquet"):
            if not written or other != path:
                other.unlink()
    return written


def write_empty(root: Path, table: str, partition: Path, batch_id: str) -> Path:
    """Write a file of `table` with no rows, named `batch_id`, in the folder `partition` (of
    `table`, in the lake at `root`): the record that something computed for that partition
    gave nothing (warehouse/detector_days.py: a day without jobs or corrected-ECC counters).
    Readers of the table read no rows from it."""
    table_spec = spec(table)
    if layout.table_dir(root, table) not in partition.parents:
        raise ValueError(f"{partition} is not a partition of {table}")
    batch_id = layout.safe_name(batch_id)
    schema = table_spec.schema.append(pa.field(BATCH_COLUMN, pa.string()))
    path = layout.batch_path(partition, batch_id)
    _write_atomically(
        schema.with_metadata({_BATCHES_KEY: batch_id.encode()}), [], path, split_floats=False
    )
    return path


def _row_groups(batch: pa.Table | pa.RecordBatchReader) -> Iterator[pa.Table]:
    """`batch` in tables of _ROW_GROUP rows (the last fewer), small reader batches joined."""
    if isinstance(batch, pa.Table):
        yield batch
        return
    pending: list[pa.RecordBatch] = []
    held = 0
    for record_batch in batch:
        pending.append(record_batch)
        held += record_batch.num_rows
        if held >= _ROW_GROUP:
            yield pa.Table.from_batches(pending)
            pending, held = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def compact(
    root: Path,
    table: str,
    min_files: int = 2,
    *,
    before: dt.date | None = None,
    since: dt.date | None = None,
    max_bytes: int | None = None,
    log: bool = False,
) -> int:
    """Merge the files of each partition of `table` that has at least `min_files` of them.

    Returns the number of partitions compacted. Rows keep their `_batch`, so re-landing a batch
    after compaction still replaces instead of duplicating. Only files this writer landed (they
    carry their batch ids) are merged: a file another tool placed in the layout is its to rewrite.

    `before`: only day partitions of dates before it (and no date-less partition), so days that
    collectors still write to are left alone. `since`: only day partitions of that date or later
    (and no date-less partition). `max_bytes`: merge runs of files of at most this
    many bytes in all, in name order, each into one file (which bounds the memory a merge takes);
    by default a partition's files all become one. `log`: record each day partition's merge
    in warehouse/compaction_log.py (for a table whose derived state can be carried across it).
    """
    by_partition: dict[Path, list[Path]] = {}
    for path in layout.table_files(root, table):
        by_partition.setdefault(path.parent, []).append(path)
    compacted = 0
    for folder, listed in sorted(by_partition.items()):
        if len(listed) < min_files:
            continue
        if before is not None or since is not None:
            key = layout.partition_key(listed[0])
            if key is None:
                continue
            day = key[1]
            if (before is not None and day >= before) or (since is not None and day < since):
                continue
        # Landing a batch of the table (which may rewrite a file of this partition or evict
        # its rows from one) waits meanwhile: the files are listed again under the lock.
        with layout.table_lock(root, table):
            try:
                _recover(folder)
                merged = _compact_partition(folder, min_files, max_bytes)
            except (pa.ArrowException, OSError) as exc:  # a file it cannot read: left as is
                logger.warning("%s: not compacted, a file does not read: %s", folder, exc)
                continue
            if merged is None:
                continue
            compacted += 1
            key = layout.partition_key(folder)
            if log and key is not None:
                # after the renames, still under the lock: a crash before leaves no entry
                compaction_log.record(root, table, key, merged)
    return compacted


def _committed(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))


def _compact_partition(
    folder: Path, min_files: int, max_bytes: int | None
) -> compaction_log.Merge | None:
    """Merge the partition's files; return its files' listings before and after (None: nothing
    was merged)."""
    listed = _committed(folder)
    paths = [p for p in listed if _batches_in(p)]
    if len(paths) < min_files:
        return None
    before = layout.files_listing(listed)
    merged_any = False
    for run in _runs(paths, max_bytes):
        if len(run) > 1:
            _merge(folder, run)
            merged_any = True
    if not merged_any:
        return None
    return compaction_log.Merge(before, layout.files_listing(_committed(folder)))


def _runs(paths: list[Path], max_bytes: int | None) -> list[list[Path]]:
    """`paths` in consecutive runs of at most `max_bytes` in all (one run when None)."""
    if max_bytes is None:
        return [paths]
    runs: list[list[Path]] = [[]]
    size = 0
    for path in paths:
        bytes_ = path.stat().st_size
        if runs[-1] and size + bytes_ > max_bytes:
            runs.append([])
            size = 0
        runs[-1].append(path)
        size += bytes_
    return runs


def _merge(folder: Path, paths: list[Path]) -> None:
    """Write the rows of `paths` (files of one partition) as one file, then remove them; a crash
    between the two is finished by `_recover` (warehouse/intents.py)."""
    merged = pa.concat_tables([read_parquet(p) for p in paths], promote_options="default")
    batches: set[str] = set()
    for path in paths:
        batches |= _batches_in(path)
    digest = hashlib.sha1(",".join(sorted(batches)).encode()).hexdigest()[:16]
    target = folder / f"compact-{digest}.parquet"
    sources = tuple(intents.stat_of(p) for p in paths)
    intent = intents.record(folder, intents.Intent("merge", target.name, sources))
    atomic_write(merged, target, batches)
    for path in paths:
        if path != target:
            path.unlink()
    intents.clear(intent)


# Raw tables' day partitions are compacted once they hold this many files: a collector that
# lands one file per scrape (dcgm-exporter, the NVML agent) writes thousands a day, and every
# reader (views, the owner check per sample file) pays per file. Runs of at most this many
# bytes become one file each.
COMPACT_MIN_FILES = 32
COMPACT_MAX_BYTES = 64 * 1024 * 1024


def compact_closed_days(root: Path, today: dt.date, since: dt.date | None = None) -> int:
    """Compact the raw tables' day partitions of `COMPACT_MIN_FILES` files or more whose day
    ended at least a day before `today` (UTC), and is `since` or later when given (`gpuledger
    attribute --since`: older history is left as it is); return the number of partitions
    compacted.

    The day of grace keeps compaction away from partitions a collector may still land in (a
    late scrape, a Prometheus window landing again), so no newer version of a batch can be
    merged away. First, changes of any partition that a crash left half done are finished
    (`recover`), so the marts built next never count a row twice.
    """
    recover(root)
    before = today - dt.timedelta(days=1)
    return sum(
        compact(
            root,
            table,
            COMPACT_MIN_FILES,
            before=before,
            since=since,
            max_bytes=COMPACT_MAX_BYTES,
            log=compaction_log.logged(table),  # a reader carries its state across
        )
        for table in RAW_TABLES
    )
