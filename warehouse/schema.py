"""The columns and types of every table in the lake (DESIGN §3 and §4.1), and how each is
partitioned.

This is the one place the contract's columns, types and units are written down. Raw tables are
landed by collectors; marts are built from them by `warehouse.attribution`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "ALLOWED_VALUES",
    "MARTS",
    "OWN_TABLES",
    "RAW_TABLES",
    "TABLES",
    "Column",
    "TableSpec",
    "arrow_type",
    "spec",
]

# Each column's type, written as DuckDB names it (what a view over the table's files casts
# to); `arrow_type` gives the Arrow type the writer lands. Written so, not as pyarrow objects,
# a command that only reads the lake (`gpuledger job`, the job-end mail) loads no pyarrow and
# numpy (~0.15-0.25 s of a new process's start-up).
_ts = "TIMESTAMP WITH TIME ZONE"  # milliseconds, UTC
_f32 = "FLOAT"
_f64 = "DOUBLE"
_i16 = "SMALLINT"
_i32 = "INTEGER"
_i64 = "BIGINT"
_str = "VARCHAR"
_bool = "BOOLEAN"
_date = "DATE"
_strings = "VARCHAR[]"


def arrow_type(column_type: str) -> pa.DataType:
    """The Arrow type of a column of `column_type` (one of the types above)."""
    import pyarrow as pa

    types = {
        _ts: pa.timestamp("ms", tz="UTC"),
        _f32: pa.float32(),
        _f64: pa.float64(),
        _i16: pa.int16(),
        _i32: pa.int32(),
        _i64: pa.int64(),
        _str: pa.string(),
        _bool: pa.bool_(),
        _date: pa.date32(),
        _strings: pa.list_(pa.string()),
    }
    return types[column_type]


class Column(NamedTuple):
    """One column of the contract: its name, its type (DuckDB's name of it) and whether it
    may hold nulls."""

    name: str
    type: str
    nullable: bool = True


def _schema(*fields: tuple[str, str] | tuple[str, str, bool]) -> tuple[Column, ...]:
    """A table's columns; a column is nullable unless its third element says False."""
    return tuple(Column(*f) for f in fields)


# Each table's Arrow schema, built the first time it is asked for (TableSpec.schema).
_ARROW_SCHEMAS: dict[tuple[Column, ...], pa.Schema] = {}


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table of the lake: its columns, the column whose UTC date names its partition, its
    key.

    `key` is what identifies a row for deduplication (views keep one row per key where the
    table is versioned, e.g. `jobs` → `jobs_latest`).
    """

    name: str
    columns: tuple[Column, ...]
    date_column: str | None
    key: tuple[str, ...]
    mart: bool = False

    @property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema (what the writer conforms a batch to)."""
        schema = _ARROW_SCHEMAS.get(self.columns)
        if schema is None:
            import pyarrow as pa

            schema = pa.schema(
                [pa.field(c.name, arrow_type(c.type), nullable=c.nullable) for c in self.columns]
            )
            _ARROW_SCHEMAS[self.columns] = schema
        return schema


GPU_SAMPLES = _schema(
    ("ts", _ts, False),
    ("cluster", _str, False),
    ("node", _str, False),
    ("gpu_index", _i16),
    ("gpu_uuid", _str),
    ("mig_profile", _str),
    ("mig_instance", _i16),
    ("model", _str),
    ("interval_s", _f32, False),
    ("job_id", _str),
    ("gpu_util_pct", _f32),
    ("engine_active", _f32),
    ("sm_active", _f32),
    ("sm_occupancy", _f32),
    ("tensor_active", _f32),
    ("dram_active", _f32),
    ("fb_used_mib", _f32),
    ("fb_free_mib", _f32),
    ("power_w", _f32),
    ("energy_j", _f64),
    ("temp_c", _f32),
    ("mem_temp_c", _f32),
    ("sm_clock_mhz", _f32),
    ("mem_clock_mhz", _f32),
    ("clock_event_reasons", _i64),
    ("pcie_tx_bps", _f64),
    ("pcie_rx_bps", _f64),
    ("nvlink_tx_bps", _f64),
    ("nvlink_rx_bps", _f64),
    ("xid_last", _i32),
    ("ecc_sbe_volatile", _i64),
    ("ecc_dbe_volatile", _i64),
    ("remap_pending", _bool),
    ("remap_failure", _bool),
    ("k8s_namespace", _str),
    ("k8s_pod", _str),
    ("k8s_container", _str),
    ("hpc_job", _str),
    ("source", _str, False),
)

JOBS = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("job_id_raw", _str),
    ("user", _str),
    ("account", _str),
    ("partition", _str),
    ("qos", _str),
    ("job_name", _str),
    ("state", _str),
    ("exit_code", _str),
    ("submit_ts", _ts),
    ("start_ts", _ts),
    ("end_ts", _ts),
    ("time_limit_s", _i64),
    ("gpus", _i32),
    ("gpus_requested", _i32),
    ("gpu_type", _str),
    ("nodes", _strings),
    ("cpus", _i32),
    ("mem_req_mib", _i64),
    ("cpu_time_s", _f64),
    ("max_rss_mib", _f64),
    ("interactive", _bool),
    ("requeues", _i32),
    ("source", _str, False),
    ("updated_ts", _ts, False),
)

# DESIGN §3.3. `mig_instance` (nullable) is there because a MIG allocation is a
# (gpu_uuid, GPU_I_ID) pair and cannot be attributed from the parent GPU alone.
JOB_GPUS = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("node", _str, False),
    ("gpu_index", _i16),
    ("gpu_uuid", _str),
    ("mig_instance", _i16),
    ("start_ts", _ts, False),
    ("end_ts", _ts),
    ("mapping", _str, False),
)

GPU_EVENTS = _schema(
    ("cluster", _str, False),
    ("node", _str, False),
    ("gpu_uuid", _str),
    ("gpu_index", _i16),
    ("ts", _ts, False),
    ("kind", _str, False),
    ("code", _i64),
    ("detail", _str),
)

GPUS = _schema(
    ("cluster", _str, False),
    ("node", _str, False),
    ("gpu_index", _i16),
    ("gpu_uuid", _str),
    ("model", _str),
    ("mig_profile", _str),
    ("fb_total_mib", _f32),
    ("power_limit_w", _f32),
    ("first_seen", _ts),
    ("last_seen", _ts),
)

# DESIGN §3.4: application throughput counters a training loop reports through
# `collector.throughput` (Prometheus endpoint and/or the node agent's spool). Append only: one row
# per report; counters are per reporting process (`node`, `reporter`), so a job's total is the sum
# over its reporters of each one's latest value (reset-aware, like any counter). `model_params`
# is a gauge, not a counter: the trained model's parameter count where the application gives
# it (the N of MFU's 6·N FLOPs per token; `job_usage.mfu`).
APP_THROUGHPUT = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("ts", _ts, False),
    ("node", _str),
    ("reporter", _str),
    ("samples_total", _f64),
    ("tokens_total", _f64),
    ("steps_total", _f64),
    ("source", _str, False),
    ("model_params", _i64),
)

SIM_TRUTH = _schema(
    ("cluster", _str, False),
    ("subject_kind", _str, False),
    ("subject_id", _str, False),
    ("label", _str, False),
    ("start_ts", _ts, False),
    ("end_ts", _ts),
)

FINDINGS = _schema(
    ("cluster", _str, False),
    ("finding_id", _str, False),
    ("detector", _str, False),
    ("severity", _str, False),
    ("subject_kind", _str, False),
    ("subject_id", _str, False),
    ("job_id", _str),
    ("user", _str),
    ("account", _str),
    ("node", _str),
    ("gpu_uuid", _str),
    ("start_ts", _ts),
    ("end_ts", _ts),
    ("detected_ts", _ts, False),
    ("predicted", _bool),
    ("score", _f32),
    ("gpu_h_at_stake", _f64),
    ("message", _str),
    ("evidence", _str),
)

RECOMMENDATIONS = _schema(
    ("cluster", _str, False),
    ("rec_id", _str, False),
    ("kind", _str, False),
    ("scope", _str),
    ("target", _str),
    ("evidence", _str),
    ("expected_gain_gpu_h", _f64),
    ("risk", _str),
    ("config", _str),
    ("created_ts", _ts, False),
)

# What `gpuledger detect` keeps of each GPU's hours (DESIGN §3.5): the rows of
# sql/detectors/gpu_health_hourly.sql, built a day at a time from that day's sample files and
# rebuilt when they change (warehouse/detector_days.py), so the health rules read the hours
# instead of every sample of the lake at each run.
GPU_HEALTH_HOURLY = _schema(
    ("cluster", _str, False),
    ("node", _str, False),
    ("gpu_uuid", _str),
    ("gpu_index", _i16),
    ("model", _str),
    ("hour", _ts, False),
    ("samples", _i64, False),
    ("interval_s", _f32),
    ("thermal_samples", _i64, False),
    ("hw_slowdown_samples", _i64, False),
    ("power_brake_samples", _i64, False),
    # samples carrying any of those reasons, each once (one sample often carries two: NVML
    # sets HW slowdown with HW thermal)
    ("throttled_samples", _i64),
    ("busy_samples", _i64, False),
    ("throttled_busy_samples", _i64, False),
    ("clock_throttled_mean", _f64),
    ("clock_busy_max", _f32),
    ("temp_max", _f32),
    ("sbe_max", _i64),
    ("dbe_min", _i64),
    ("dbe_max", _i64),
    ("remap_pending", _bool, False),
    ("remap_failure", _bool, False),
)

# What `gpuledger detect` keeps of each GPU's corrected-ECC counter per hour (DESIGN §3.5): the
# rows of sql/detectors/gpu_ecc_hourly.sql (the counter's steps within the hour, its first and
# last value), built a day at a time like `gpu_health_hourly`; the health-trend rule puts the
# hours together (sql/detectors/gpu_ecc_trend_hourly_stored.sql).
GPU_ECC_HOURLY = _schema(
    ("cluster", _str, False),
    ("gpu_uuid", _str, False),
    ("node", _str),
    ("gpu_index", _i16),
    ("hour", _ts, False),
    ("samples", _i64, False),
    ("sbe_steps", _f64, False),
    ("first_sbe", _i64),
    ("last_sbe", _i64),
    ("sbe_max", _i64),
    ("remap_pending", _bool, False),
)

# What `gpuledger detect` keeps of each job's GPUs (DESIGN §3.5): the rows of
# sql/detectors/bottleneck_devices.sql, a job's GPU on a day, built a day at a time from that
# day's sample files and the allocations owning them (warehouse/detector_days.py); the
# bottleneck signals put a job's days together (sql/detectors/bottleneck_signals.sql).
BOTTLENECK_DEVICE_DAYS = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("device", _str),
    ("first_ts", _ts, False),
    ("last_ts", _ts, False),
    ("samples", _i64, False),
    *((name, _f64) for name in (
        "w", "busy_w", "busy_known", "util_w", "util_known", "sm_w", "sm_known", "tensor_w",
        "tensor_known", "dram_w", "dram_known", "nvlink_w", "nvlink_known", "pcie_w",
        "pcie_known", "idle_w", "gap_w", "burst_w",
    )),
    ("first_busy", _f32),
    ("last_busy", _f32),
    ("bursts", _i64, False),
)  # fmt: skip

# DESIGN §3.6: Kubernetes queues (Kueue, Volcano), for fairness reporting. One row per
# queue version and GPU resource: a queue whose quota names several flavors or GPU resources
# (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, …) has one row each; a queue with no GPU quota
# has one row with `flavor`/`resource` null. Quantities are in units of `resource` (whole GPUs,
# or MIG instances); null means "not set" (e.g. no borrowing limit). `deleted` marks the
# version landed when the queue disappeared. The latest `updated_ts` per key wins. A Kueue
# ClusterQueue's `queueing_strategy` and `preemption_*` (withinClusterQueue,
# reclaimWithinCohort) are Kueue's own words; null for other kinds (added for the policy lab).
QUEUES = _schema(
    ("cluster", _str, False),
    ("kind", _str, False),
    ("name", _str, False),
    ("namespace", _str),
    ("parent", _str),
    ("flavor", _str),
    ("resource", _str),
    ("gpu_quota", _f64),
    ("gpu_borrowing_limit", _f64),
    ("gpu_lending_limit", _f64),
    ("gpu_guarantee", _f64),
    ("gpu_limit", _f64),
    ("weight", _f64),
    ("deleted", _bool),
    ("updated_ts", _ts, False),
    ("queueing_strategy", _str),
    ("preemption_within_cluster_queue", _str),
    ("preemption_reclaim_within_cohort", _str),
)

# DESIGN §3.6: entitlements for the fairness report (issue 8). One row per scheduler
# association version: an account (`user` null, `parent` its parent account, null for the root)
# or a user under `account`. `raw_shares` is Slurm's RawShares (sacctmgr FairShare); null where
# the association takes its parent's (FairShare=parent). `source`: `sacctmgr`, `config`.
ASSOCIATIONS = _schema(
    ("cluster", _str, False),
    ("account", _str, False),
    ("user", _str),
    ("parent", _str),
    ("raw_shares", _i64),
    ("source", _str, False),
    ("updated_ts", _ts, False),
)

# DESIGN §3.6 (for the policy lab): what decides scheduling, as the scheduler
# reported it (`gpuledger collect slurm-config`): one row per (kind, name, key) of a snapshot;
# kind is config (`scontrol show config`), partition, node, qos or assoc (name: the account).
# Every run lands a whole snapshot at one updated_ts; the latest snapshot is the configuration.
SCHEDULER_CONFIG = _schema(
    ("cluster", _str, False),
    ("kind", _str, False),
    ("name", _str, False),
    ("key", _str, False),
    ("value", _str),
    ("source", _str, False),
    ("updated_ts", _ts, False),
)

# DESIGN §3.6: what `gpuledger evaluate` scored, one row per run, setting and detector
# (detectors.evaluation). Rates are null where their denominator is zero.
EVALUATION_SCORES = _schema(
    ("cluster", _str, False),
    ("run_id", _str, False),
    ("created_ts", _ts, False),
    ("setting", _str, False),
    ("seeds", _str),
    ("detector", _str, False),
    ("label", _str),
    ("kind", _str),
    ("subjects", _i64),
    ("flagged", _i64),
    ("true_positives", _i64),
    ("precision", _f64),
    ("recall", _f64),
    ("recall_lead_1h", _f64),
    ("lead_h_median", _f64),
    ("false_alarms", _i64),
    ("false_alarms_per_1000_gpu_days", _f64),
    ("gpu_h_saved", _f64),
    ("gpu_h_disrupted", _f64),
    ("net_gpu_h", _f64),
    ("average_precision", _f64),
    ("goal", _str),
    ("met", _bool),
    ("detail", _str),
)

# ---- marts (built by `gpuledger attribute`; SQL in sql/marts/) ----

JOB_USAGE = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("user", _str),
    ("account", _str),
    ("partition", _str),
    ("state", _str),
    ("start_ts", _ts),
    ("end_ts", _ts),
    ("gpus", _i32),
    ("alloc_gpu_h", _f64),
    ("observed_gpu_h", _f64),
    ("active_gpu_h", _f64),
    ("idle_gpu_h", _f64),
    ("effective_gpu_h", _f64),
    ("busy_mean", _f64),
    ("gpu_util_pct_mean", _f64),
    ("sm_active_mean", _f64),
    ("tensor_active_mean", _f64),
    ("dram_active_mean", _f64),
    ("fb_used_mib_max", _f64),
    ("energy_kwh", _f64),
    ("power_w_mean", _f64),
    ("est_tflops_mean", _f64),
    ("nvlink_gb", _f64),
    ("pcie_gb", _f64),
    ("gpus_never_active", _i32),
    ("samples", _i64),
    ("app_throughput", _f64),
    ("shared", _bool),  # some of its GPU time was on a shared GPU: the split is an estimate
    ("model_params", _i64),  # parameters of the model it trained, as the application reported
    ("tokens_per_s_per_gpu", _f64),  # reported tokens per second of the reports' span, per GPU
    ("mfu", _f64),  # model FLOPs utilisation 0–1: 6 × params × tokens/s ÷ the GPUs' peak
    ("kg_co2e", _f64),  # energy × the hour's carbon intensity (null: energy or intensity unknown)
    ("co2e_fallback_hours", _i32),  # hours the cluster's CSV lacked (its constant stood in)
)

JOB_OUTCOMES = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("user", _str),
    ("account", _str),
    ("state", _str),
    ("outcome", _str),
    ("failed", _bool),
    ("timed_out", _bool),
    ("preempted", _bool),
    ("requeued", _bool),
    ("alloc_gpu_h", _f64),
    ("gpu_h_lost_requeue", _f64),  # held by runs before a requeue (part of gpu_h_lost)
    ("gpu_h_lost", _f64),  # the total lost: the last run if it did not finish, and those
    ("hw_event_before_end", _bool),
    ("hw_event_kinds", _str),
)

USAGE_DAILY = _schema(
    ("cluster", _str, False),
    ("date", _date, False),
    ("account", _str),
    ("user", _str),
    ("jobs", _i64),
    ("alloc_gpu_h", _f64),
    ("observed_gpu_h", _f64),
    ("active_gpu_h", _f64),
    ("idle_gpu_h", _f64),
    ("effective_gpu_h", _f64),
    ("energy_kwh", _f64),
    ("shared", _bool),
    ("kg_co2e", _f64),
)

FAIRNESS_WEEKLY = _schema(
    ("cluster", _str, False),
    ("week", _date, False),
    ("level", _str, False),
    ("account", _str, False),
    ("user", _str),
    ("jobs", _i64),
    ("jobs_started", _i64),
    ("alloc_gpu_h", _f64),
    ("observed_gpu_h", _f64),
    ("effective_gpu_h", _f64),
    ("idle_gpu_h", _f64),
    ("energy_kwh", _f64),
    ("cpu_h", _f64),
    ("mem_gib_h", _f64),
    ("usage_share", _f64),
    ("effective_share", _f64),
    ("level_share", _f64),
    ("entitled_share", _f64),
    ("usage_ratio", _f64),
    ("wait_p50_s", _f64),
    ("wait_p95_s", _f64),
    ("low_eff_gpu_h", _f64),
    ("failed_gpu_h", _f64),
    ("unused_limit_gpu_h", _f64),
    ("waste_gpu_h", _f64),
    ("kg_co2e", _f64),
)

CLUSTER_OCCUPANCY = _schema(
    ("cluster", _str, False),
    ("bucket", _ts, False),
    ("gpus_total", _f64),
    ("gpus_allocated", _f64),
    ("gpus_active", _f64),
    ("gpus_idle_allocated", _f64),
    ("gpus_unallocated", _f64),
    ("gpus_unobserved", _f64),
)

BUCKET_OCCUPANCY = _schema(
    ("cluster", _str, False),
    ("date", _date, False),
    ("bucket", _ts, False),
    ("allocated_s", _f64),
    ("active_s", _f64),
    ("idle_s", _f64),
    ("unallocated_s", _f64),
)

GPU_JOB_BUCKETS = _schema(
    ("cluster", _str, False),
    ("device", _str, False),
    ("mig_instance", _i16),
    ("job_id", _str),
    ("bucket", _ts, False),
    ("date", _date, False),
    ("node", _str),
    ("gpu_index", _i16),
    ("gpu_uuid", _str),
    ("model", _str),
    ("samples", _i64),
    ("share", _f64),
    ("first_e", _f64),
    ("last_end_e", _f64),
    ("interval_end_e", _f64),
    ("gap_s", _f64),
    ("observed_s", _f64),
    ("carry_s", _f64),
    ("carry_share", _f64),
    ("carry_busy", _f64),
    ("carry_sharers", _i64),
    ("observed_share_s", _f64),
    ("active_share_s", _f64),
    ("idle_share_s", _f64),
    ("active_s", _f64),
    ("carry_active_s", _f64),
    ("idle_s", _f64),
    ("carry_idle_s", _f64),
    ("effective_s", _f64),
    ("busy_known_s", _f64),
    ("util_sum", _f64),
    ("util_known_s", _f64),
    ("sm_sum", _f64),
    ("sm_known_s", _f64),
    ("tensor_sum", _f64),
    ("tensor_known_s", _f64),
    ("dram_sum", _f64),
    ("dram_known_s", _f64),
    ("fb_used_mib_max", _f64),
    ("energy_j", _f64),
    ("power_sum", _f64),
    ("power_known_s", _f64),
    ("nvlink_bytes", _f64),
    ("pcie_bytes", _f64),
    ("shared_s", _f64),
)

JOB_GPU_DAILY = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("device", _str, False),
    ("mig_instance", _i16),
    ("date", _date, False),
    ("node", _str),
    ("gpu_index", _i16),
    ("gpu_uuid", _str),
    ("model", _str),
    ("samples", _i64),
    ("observed_s", _f64),
    ("active_s", _f64),
    ("idle_s", _f64),
    ("effective_s", _f64),
    ("busy_known_s", _f64),
    ("util_sum", _f64),
    ("util_known_s", _f64),
    ("sm_sum", _f64),
    ("sm_known_s", _f64),
    ("tensor_sum", _f64),
    ("tensor_known_s", _f64),
    ("dram_sum", _f64),
    ("dram_known_s", _f64),
    ("tflops_sum", _f64),
    ("fb_used_mib_max", _f64),
    ("energy_j", _f64),
    ("power_sum", _f64),
    ("power_known_s", _f64),
    ("nvlink_bytes", _f64),
    ("pcie_bytes", _f64),
    ("shared_s", _f64),
    ("next_day_s", _f64),
    ("next_day_active_s", _f64),
    ("next_day_idle_s", _f64),
    ("next_day_effective_s", _f64),
    ("next_day_shared_s", _f64),
)

JOB_ENERGY_HOURLY = _schema(
    ("cluster", _str, False),
    ("job_id", _str, False),
    ("hour", _ts, False),
    ("date", _date, False),
    ("energy_j", _f64),
)

# The closed sets of values DESIGN §3 gives for enum columns; the writer refuses any other value
# (null stays allowed where the column is nullable). Where the contract says "e.g." (sim_truth
# labels, recommendation kinds, sources) the set is open and not listed here.
ALLOWED_VALUES: dict[str, dict[str, frozenset[str]]] = {
    "job_gpus": {
        "mapping": frozenset(
            {"scontrol-idx", "exporter-label", "nvml-cgroup", "whole-node", "trace", "sim"}
        ),
    },
    "gpu_events": {
        "kind": frozenset(
            {
                "xid",
                "ecc_dbe",
                "row_remap_failure",
                "hw_slowdown",
                "thermal",
                "power_brake",
                "offline",
            }
        ),
    },  # fmt: skip
    # `user` (DESIGN §3.4): the simulator's `wasteful_user` truth, which `low_efficiency_user`
    # findings are scored against, is about a user.
    "sim_truth": {"subject_kind": frozenset({"job", "gpu", "node", "user"})},
    "findings": {
        "severity": frozenset({"info", "warn", "critical"}),
        "subject_kind": frozenset({"job", "user", "account", "gpu", "node"}),
    },
    "recommendations": {"target": frozenset({"slurm", "kueue"})},
}

RAW_TABLES: dict[str, TableSpec] = {
    s.name: s
    for s in (
        # a shared GPU (MPS, time-slicing) has one row per sharer at one ts, each with its job
        TableSpec(
            "gpu_samples",
            GPU_SAMPLES,
            "ts",
            ("cluster", "gpu_uuid", "mig_instance", "ts", "job_id"),
        ),
        TableSpec("jobs", JOBS, "submit_ts", ("cluster", "job_id")),
        TableSpec("job_gpus", JOB_GPUS, "start_ts", ("cluster", "job_id", "node", "gpu_index")),
        TableSpec("gpu_events", GPU_EVENTS, "ts", ("cluster", "node", "gpu_index", "ts", "kind")),
        TableSpec("gpus", GPUS, "first_seen", ("cluster", "node", "gpu_index")),
        TableSpec(
            "app_throughput",
            APP_THROUGHPUT,
            "ts",
            ("cluster", "job_id", "node", "reporter", "ts"),
        ),
        TableSpec("sim_truth", SIM_TRUTH, "start_ts", ("cluster", "subject_kind", "subject_id")),
        TableSpec("findings", FINDINGS, "detected_ts", ("cluster", "finding_id")),
        TableSpec("recommendations", RECOMMENDATIONS, "created_ts", ("cluster", "rec_id")),
        TableSpec(
            "gpu_health_hourly",
            GPU_HEALTH_HOURLY,
            "hour",
            ("cluster", "node", "gpu_uuid", "gpu_index", "hour"),
        ),
        TableSpec("gpu_ecc_hourly", GPU_ECC_HOURLY, "hour", ("cluster", "gpu_uuid", "hour")),
        TableSpec(
            "bottleneck_device_days",
            BOTTLENECK_DEVICE_DAYS,
            "first_ts",
            ("cluster", "job_id", "device", "first_ts"),
        ),
        TableSpec(
            "queues",
            QUEUES,
            "updated_ts",
            ("cluster", "kind", "namespace", "name", "flavor", "resource"),
        ),
        TableSpec("associations", ASSOCIATIONS, "updated_ts", ("cluster", "account", "user")),
        TableSpec(
            "scheduler_config",
            SCHEDULER_CONFIG,
            "updated_ts",
            ("cluster", "kind", "name", "key", "updated_ts"),
        ),
        TableSpec(
            "evaluation_scores",
            EVALUATION_SCORES,
            "created_ts",
            ("cluster", "run_id", "setting", "detector"),
        ),
    )
}

MARTS: dict[str, TableSpec] = {
    s.name: s
    for s in (
        TableSpec(
            "gpu_job_buckets",
            GPU_JOB_BUCKETS,
            "bucket",
            ("cluster", "device", "mig_instance", "job_id", "bucket"),
            mart=True,
        ),
        TableSpec(
            "job_gpu_daily",
            JOB_GPU_DAILY,
            "date",
            ("cluster", "job_id", "device", "mig_instance", "date"),
            mart=True,
        ),
        TableSpec(
            "job_energy_hourly",
            JOB_ENERGY_HOURLY,
            "date",
            ("cluster", "job_id", "hour"),
            mart=True,
        ),
        TableSpec(
            "bucket_occupancy",
            BUCKET_OCCUPANCY,
            "date",
            ("cluster", "date", "bucket"),
            mart=True,
        ),
        TableSpec("job_usage", JOB_USAGE, None, ("cluster", "job_id"), mart=True),
        TableSpec("job_outcomes", JOB_OUTCOMES, None, ("cluster", "job_id"), mart=True),
        TableSpec("usage_daily", USAGE_DAILY, "date", ("cluster", "date", "account", "user"), True),
        TableSpec("cluster_occupancy", CLUSTER_OCCUPANCY, "bucket", ("cluster", "bucket"), True),
        TableSpec(
            "fairness_weekly",
            FAIRNESS_WEEKLY,
            "week",
            ("cluster", "week", "level", "account", "user"),
            mart=True,
        ),
    )
}

# gpuledger's own outputs among the raw tables: detect's (findings, recommendations, what it keeps
# of the samples a day at a time) and evaluate's; what the sources land is the rest
OWN_TABLES = (
    "findings",
    "recommendations",
    "gpu_health_hourly",
    "gpu_ecc_hourly",
    "bottleneck_device_days",
    "evaluation_scores",
)

TABLES: dict[str, TableSpec] = {**RAW_TABLES, **MARTS}


def spec(table: str) -> TableSpec:
    """Return the spec of `table`, or raise UnknownTable naming the known ones."""
    from warehouse.errors import UnknownTable

    try:
        return TABLES[table]
    except KeyError:
        raise UnknownTable(
            f"No table named {table!r}; known: {', '.join(sorted(TABLES))}"
        ) from None
