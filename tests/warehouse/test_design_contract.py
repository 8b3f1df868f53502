"""The Arrow schemas in warehouse/schema.py against DESIGN §3 and §4.1, written out by hand.

DESIGN.md is the contract between the parts; these tables copy its columns, types and units, so
a change to a schema that drifts from it fails here, and a deliberate change updates both.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from warehouse.arrow_arrays import TIMESTAMP
from warehouse.schema import MARTS, RAW_TABLES

TS, STR, F32, F64 = TIMESTAMP, pa.string(), pa.float32(), pa.float64()
I16, I32, I64, BOOL = pa.int16(), pa.int32(), pa.int64(), pa.bool_()

# §3.1: every column with the type the table states (timestamps ms UTC; float32 metrics, float64
# energy and byte rates, int64 bitmask and ECC counts, int32 XID, int16 index and MIG instance).
GPU_SAMPLES = {
    "ts": TS, "cluster": STR, "node": STR, "gpu_index": I16, "gpu_uuid": STR,
    "mig_profile": STR, "mig_instance": I16, "model": STR, "interval_s": F32, "job_id": STR,
    "gpu_util_pct": F32, "engine_active": F32, "sm_active": F32, "sm_occupancy": F32,
    "tensor_active": F32, "dram_active": F32, "fb_used_mib": F32, "fb_free_mib": F32,
    "power_w": F32, "energy_j": F64, "temp_c": F32, "mem_temp_c": F32, "sm_clock_mhz": F32,
    "mem_clock_mhz": F32, "clock_event_reasons": I64, "pcie_tx_bps": F64, "pcie_rx_bps": F64,
    "nvlink_tx_bps": F64, "nvlink_rx_bps": F64, "xid_last": I32, "ecc_sbe_volatile": I64,
    "ecc_dbe_volatile": I64, "remap_pending": BOOL, "remap_failure": BOOL,
    "k8s_namespace": STR, "k8s_pod": STR, "k8s_container": STR, "hpc_job": STR, "source": STR,
}  # fmt: skip
# "Every metric column is nullable": all but the sample's identity and span.
GPU_SAMPLES_REQUIRED = {"ts", "cluster", "node", "interval_s", "source"}

# §3.2–3.5: the columns named (types where the contract gives them, else what the schema chose).
CONTRACT_COLUMNS = {
    "jobs": [
        "cluster", "job_id", "job_id_raw", "user", "account", "partition", "qos", "job_name",
        "state", "exit_code", "submit_ts", "start_ts", "end_ts", "time_limit_s", "gpus",
        "gpus_requested", "gpu_type", "nodes", "cpus", "mem_req_mib", "cpu_time_s",
        "max_rss_mib", "interactive", "requeues", "source", "updated_ts",
    ],
    "job_gpus": [
        "cluster", "job_id", "node", "gpu_index", "gpu_uuid", "start_ts", "end_ts", "mapping",
    ],
    "gpu_events": ["cluster", "node", "gpu_uuid", "gpu_index", "ts", "kind", "code", "detail"],
    "gpus": [
        "cluster", "node", "gpu_index", "gpu_uuid", "model", "mig_profile", "fb_total_mib",
        "power_limit_w", "first_seen", "last_seen",
    ],
    "sim_truth": ["cluster", "subject_kind", "subject_id", "label", "start_ts", "end_ts"],
    "findings": [
        "cluster", "finding_id", "detector", "severity", "subject_kind", "subject_id", "job_id",
        "user", "account", "node", "gpu_uuid", "start_ts", "end_ts", "detected_ts", "predicted",
        "score", "gpu_h_at_stake", "message", "evidence",
    ],
    "recommendations": [
        "cluster", "rec_id", "kind", "scope", "target", "evidence", "expected_gain_gpu_h",
        "risk", "config", "created_ts",
    ],
}  # fmt: skip
# Columns a schema adds to the contract's, each with its reason in warehouse/schema.py.
DOCUMENTED_ADDITIONS = {"job_gpus": {"mig_instance"}}

# §4.1: the marts' columns as listed (extras allowed only where named here).
MART_COLUMNS = {
    "job_usage": [
        "cluster", "job_id", "user", "account", "partition", "state", "start_ts", "end_ts",
        "gpus", "alloc_gpu_h", "observed_gpu_h", "active_gpu_h", "idle_gpu_h", "effective_gpu_h",
        "busy_mean", "gpu_util_pct_mean", "sm_active_mean", "tensor_active_mean",
        "dram_active_mean", "fb_used_mib_max", "energy_kwh", "power_w_mean", "est_tflops_mean",
        "nvlink_gb", "pcie_gb", "gpus_never_active", "samples", "app_throughput",
        "model_params", "tokens_per_s_per_gpu", "mfu",
    ],
    "cluster_occupancy": [
        "cluster", "bucket", "gpus_total", "gpus_allocated", "gpus_active",
        "gpus_idle_allocated", "gpus_unallocated", "gpus_unobserved",
    ],
    "usage_daily": [
        "cluster", "date", "account", "user", "alloc_gpu_h", "observed_gpu_h", "active_gpu_h",
        "idle_gpu_h", "effective_gpu_h", "energy_kwh",
    ],
    "fairness_weekly": [
        "cluster", "week", "account", "user", "usage_share", "entitled_share", "usage_ratio",
        "wait_p50_s", "wait_p95_s", "waste_gpu_h",
    ],
    "job_outcomes": [
        "cluster", "job_id", "failed", "timed_out", "preempted", "requeued", "gpu_h_lost",
        "gpu_h_lost_requeue", "hw_event_before_end",
    ],
}  # fmt: skip
# §4: "mark those rows `shared = true`" — the marts that sum a shared GPU's split time say so.
MARTS_MARKED_SHARED = {"job_usage", "usage_daily"}


def test_gpu_samples_has_every_column_of_3_1_with_its_type_and_nothing_else():
    schema = RAW_TABLES["gpu_samples"].schema

    assert {f.name: f.type for f in schema} == GPU_SAMPLES
    assert schema.names == list(GPU_SAMPLES)  # in the contract's order


def test_every_gpu_samples_metric_is_nullable():
    schema = RAW_TABLES["gpu_samples"].schema

    assert {f.name for f in schema if not f.nullable} == GPU_SAMPLES_REQUIRED


@pytest.mark.parametrize("table", sorted(CONTRACT_COLUMNS))
def test_each_raw_table_has_exactly_the_contracts_columns(table):
    names = RAW_TABLES[table].schema.names

    assert set(names) - set(CONTRACT_COLUMNS[table]) == DOCUMENTED_ADDITIONS.get(table, set())
    assert [n for n in names if n in CONTRACT_COLUMNS[table]] == CONTRACT_COLUMNS[table]


@pytest.mark.parametrize(
    ("table", "column", "type_"),
    [
        ("jobs", "nodes", pa.list_(pa.string())),  # "list of expanded host names"
        ("jobs", "interactive", BOOL),
        ("jobs", "submit_ts", TS),
        ("jobs", "updated_ts", TS),
        ("job_gpus", "gpu_index", I16),
        ("gpu_events", "ts", TS),
        ("gpu_events", "gpu_index", I16),
        ("findings", "predicted", BOOL),
        ("findings", "detected_ts", TS),
        ("recommendations", "created_ts", TS),
        ("sim_truth", "start_ts", TS),
        ("gpus", "first_seen", TS),
    ],
)
def test_typed_columns_of_3_2_to_3_5(table, column, type_):
    assert RAW_TABLES[table].schema.field(column).type == type_


@pytest.mark.parametrize(
    ("table", "nullable"),
    [
        ("jobs", ["start_ts", "end_ts", "time_limit_s"]),  # null while pending / running; unlimited
        ("job_gpus", ["gpu_uuid", "end_ts", "gpu_index"]),  # whole-node rows have no index
        ("findings", ["job_id", "user", "account", "node", "gpu_uuid", "start_ts", "end_ts"]),
    ],
)
def test_columns_the_contract_allows_to_be_null_are_nullable(table, nullable):
    schema = RAW_TABLES[table].schema

    assert [c for c in nullable if not schema.field(c).nullable] == []


@pytest.mark.parametrize("mart", sorted(MART_COLUMNS))
def test_each_mart_has_the_columns_4_1_lists(mart):
    names = MARTS[mart].schema.names

    assert [c for c in MART_COLUMNS[mart] if c not in names] == []


@pytest.mark.parametrize("mart", sorted(MARTS_MARKED_SHARED))
def test_marts_summing_shared_gpus_carry_the_shared_flag(mart):
    assert MARTS[mart].schema.field("shared").type == BOOL


def test_every_time_column_of_every_table_is_ms_utc():
    for table in {**RAW_TABLES, **MARTS}.values():
        for field in table.schema:
            if pa.types.is_timestamp(field.type):
                assert field.type == TS, f"{table.name}.{field.name}"
