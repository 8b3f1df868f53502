"""The writer refuses batches that do not match the contract, before anything is written."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse import writer
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.errors import SchemaMismatch, UnknownTable, WarehouseError
from warehouse.schema import ALLOWED_VALUES, RAW_TABLES, TABLES, spec


def _replace(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, column)


def test_wrong_column_type_is_refused_naming_field_and_both_types(lake, make_samples, t0):
    batch = make_samples([t0, t0])
    batch = _replace(batch, "gpu_index", pa.array([0, 1], pa.int64()))

    with pytest.raises(SchemaMismatch) as info:
        writer.write_batch(lake, "gpu_samples", batch, "b1")

    assert str(info.value) == "gpu_samples.gpu_index: got type int64, expected int16"
    assert not lake.exists()  # a bad batch never becomes a file (nor a folder)


def test_timestamp_of_another_unit_is_refused(lake, make_samples, t0):
    batch = make_samples([t0])
    batch = _replace(batch, "ts", pa.array([t0], pa.timestamp("us", tz="UTC")))

    with pytest.raises(SchemaMismatch, match=r"gpu_samples\.ts: got type timestamp\[us, tz=UTC\]"):
        writer.conform(spec("gpu_samples"), batch)


def test_unknown_column_is_refused(lake, make_samples, t0):
    batch = make_samples([t0]).append_column("gpu_temperature", pa.array([41.0]))

    with pytest.raises(SchemaMismatch) as info:
        writer.write_batch(lake, "gpu_samples", batch, "b1")

    assert str(info.value).startswith("gpu_samples: unknown column(s) ['gpu_temperature']")
    assert not lake.exists()


def test_missing_required_column_is_refused(lake, make_samples, t0):
    batch = make_samples([t0]).drop_columns(["node"])

    with pytest.raises(SchemaMismatch) as info:
        writer.write_batch(lake, "gpu_samples", batch, "b1")

    assert str(info.value) == "gpu_samples: required column 'node' missing"
    assert not lake.exists()


def test_null_in_required_column_is_refused(lake, make_samples, t0):
    batch = _replace(make_samples([t0, t0]), "node", pa.array(["g001", None], pa.string()))

    with pytest.raises(SchemaMismatch) as info:
        writer.write_batch(lake, "gpu_samples", batch, "b1")

    assert str(info.value) == "gpu_samples.node: 1 null value(s) in a required column"
    assert not lake.exists()


def test_missing_nullable_columns_are_filled_with_nulls_never_zero(make_samples, t0):
    batch = make_samples([t0, t0]).drop_columns(["power_w"])

    conformed = writer.conform(spec("gpu_samples"), batch)

    assert conformed.schema == spec("gpu_samples").schema
    assert conformed.column("power_w").to_pylist() == [None, None]
    assert conformed.column("energy_j").type == pa.float64()
    assert conformed.column("energy_j").null_count == 2
    assert conformed.column("node").to_pylist() == ["g001", "g001"]


def test_columns_come_back_in_contract_order(make_samples, t0):
    batch = make_samples([t0])
    shuffled = batch.select(list(reversed(batch.column_names)))

    conformed = writer.conform(spec("gpu_samples"), shuffled)

    assert conformed.column_names == spec("gpu_samples").schema.names


def test_a_record_batch_is_accepted(make_samples, t0):
    [record_batch] = make_samples([t0]).to_batches()

    conformed = writer.conform(spec("gpu_samples"), record_batch)

    assert conformed.num_rows == 1


def test_null_partition_date_is_refused(lake):
    batch = pa.table(
        {
            "cluster": ["della"],
            "node": ["g001"],
            "gpu_index": pa.array([0], pa.int16()),
            "first_seen": pa.array([None], pa.timestamp("ms", tz="UTC")),
        }
    )

    with pytest.raises(SchemaMismatch, match=r"gpus\.first_seen: null values"):
        writer.write_batch(lake, "gpus", batch, "inventory")
    assert not lake.exists()


def test_unknown_table_is_refused_listing_known_tables(lake, make_samples, t0):
    with pytest.raises(UnknownTable) as info:
        writer.write_batch(lake, "gpu_sample", make_samples([t0]), "b1")

    message = str(info.value)
    assert message.startswith("No table named 'gpu_sample'; known: ")
    assert all(name in message for name in TABLES)
    assert isinstance(info.value, WarehouseError)


def test_empty_batch_writes_nothing(lake, make_samples):
    assert writer.write_batch(lake, "gpu_samples", make_samples([]), "b1") == []
    assert not lake.exists()


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_contract_accepts_its_own_empty_table(table):
    empty = spec(table).schema.empty_table()

    assert writer.conform(spec(table), empty).schema == spec(table).schema


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_contract_has_cluster_a_known_key_and_a_usable_date_column(table):
    table_spec = spec(table)
    names = table_spec.schema.names

    assert table_spec.schema.field("cluster").nullable is False
    assert set(table_spec.key) <= set(names)
    if table_spec.date_column is not None:
        date_type = table_spec.schema.field(table_spec.date_column).type
        assert date_type in (pa.timestamp("ms", tz="UTC"), pa.date32())
    assert table_spec.mart == (table not in RAW_TABLES)


def test_utc_date_not_local_date_names_the_partition(lake, make_samples):
    # 23:30 at UTC-5 on March 1st is 04:30 UTC on March 2nd.
    local = dt.datetime(2024, 3, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))

    [path] = writer.write_batch(lake, "gpu_samples", make_samples([local]), "b1")

    assert path.parent.name == "date=2024-03-02"


def _job_gpus(mappings: list[str | None]) -> pa.Table:
    n = len(mappings)
    return pa.table(
        {
            "cluster": pa.array(["della"] * n),
            "job_id": pa.array([f"j{i}" for i in range(n)]),
            "node": pa.array(["g001"] * n),
            "start_ts": pa.array([dt.datetime(2024, 3, 1, tzinfo=dt.UTC)] * n, TIMESTAMP),
            "mapping": pa.array(mappings, pa.string()),
        }
    )


def test_a_value_outside_an_enum_of_the_contract_is_refused_naming_it(lake):
    batch = _job_gpus(["scontrol-idx", "slurm-index", "whole-node", "slurm-index", "guess"])

    with pytest.raises(SchemaMismatch) as info:
        writer.write_batch(lake, "job_gpus", batch, "b1")

    assert str(info.value).startswith(
        "job_gpus.mapping: value(s) ['guess', 'slurm-index'] not in the contract's set; "
        "expected one of ['exporter-label', 'nvml-cgroup', 'scontrol-idx', 'sim', "
    )
    assert not lake.exists()


def test_every_value_of_each_enum_is_accepted(lake):
    mappings = sorted(ALLOWED_VALUES["job_gpus"]["mapping"])

    [path] = writer.write_batch(lake, "job_gpus", _job_gpus(mappings), "b1")

    assert sorted(pq.read_table(path).column("mapping").to_pylist()) == mappings


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("gpu_events", "kind", "ecc_sbe"),
        ("findings", "severity", "warning"),
        ("findings", "subject_kind", "pod"),
        ("recommendations", "target", "kubernetes"),
        ("sim_truth", "subject_kind", "account"),
    ],
)
def test_each_enum_of_the_contract_is_checked(table, column, value):
    with pytest.raises(SchemaMismatch, match=f"{table}.{column}: value.s. \\['{value}'\\]"):
        writer.conform(spec(table), _one_row(table, **{column: value}))


def _one_row(table: str, **values: object) -> pa.Table:
    """One row of `table` with its required columns filled (and `values`)."""
    when = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    columns = {}
    for field in spec(table).schema:
        if field.name in values:
            columns[field.name] = pa.array([values[field.name]], field.type)
        elif not field.nullable:
            fill = when if pa.types.is_timestamp(field.type) else "x"
            if field.name in ALLOWED_VALUES.get(table, {}):
                fill = min(ALLOWED_VALUES[table][field.name])
            columns[field.name] = pa.array([fill], field.type)
    return pa.table(columns)


def test_a_null_in_a_nullable_enum_column_is_not_a_value_outside_it():
    rows = _one_row("recommendations", target=None)

    assert writer.conform(spec("recommendations"), rows).column("target").null_count == 1
