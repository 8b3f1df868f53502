"""Read one cluster's recorded workload and nodes out of the lake for a replay."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from detectors.replay.engine import Workload, in_default_partition
from detectors.replay.policy import (
    Policy,
    PolicyError,
    apply_settings,
    preempt_mode,
    shares_on_the_recorded_scale,
    unknown_associations,
    unknown_names,
)
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = ["NoWorkload", "check_changes", "load_workload", "recorded_settings"]

_CANCELLED = ("CANCELLED",)


class NoWorkload(LookupError):
    """The cluster has no GPU jobs, or no GPU nodes, in the period asked for."""


def _float(series: pl.Series) -> np.ndarray:
    return series.cast(pl.Float64).fill_null(np.nan).to_numpy()


def load_workload(
    con: duckdb.DuckDBPyConnection,
    cluster: str,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> Workload:
    """The GPU jobs of `cluster` submitted in [since, until) (default: all), its GPU nodes, and
    the end of its data (the replay's horizon). Raises NoWorkload when there is nothing to run."""
    end = queries.run(con, "replay/data_end", cluster=cluster)["end_e"][0]
    if end is None:
        raise NoWorkload(f"cluster {cluster!r} has no jobs in the lake")
    last = dt.datetime.fromtimestamp(float(end), dt.UTC)
    if since is not None and until is not None and since >= until:
        raise NoWorkload(
            f"the period is empty: its start ({since:%Y-%m-%d %H:%M} UTC) is not before its "
            f"end ({until:%Y-%m-%d %H:%M} UTC)"
        )
    if since is not None and since >= last:
        raise NoWorkload(
            f"the period starts ({since:%Y-%m-%d %H:%M} UTC) after the data of cluster "
            f"{cluster!r} end ({last:%Y-%m-%d %H:%M} UTC)"
        )
    lo = since or dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    hi = until or dt.datetime.fromtimestamp(float(end) + 1, dt.UTC)
    jobs = queries.run(con, "replay/jobs", cluster=cluster, since=lo, until=hi)
    if jobs.is_empty():
        raise NoWorkload(f"cluster {cluster!r} has no GPU jobs submitted in [{lo}, {hi})")
    jobs = _in_slurm_order(jobs)
    nodes = (
        queries.run(con, "replay/nodes", cluster=cluster)
        if _has_table(con, "gpus")
        else pl.DataFrame(schema={"node": pl.String, "gpus": pl.Int32, "model": pl.String})
    )
    layout = queries.run(con, "replay/node_partitions", cluster=cluster)
    seen: dict[str, set[str]] = {}
    for node, part in layout.iter_rows():
        seen.setdefault(node, set()).add(part)
    horizon = float(end) if until is None else min(float(end), until.timestamp())
    start = _float(jobs["start_e"])
    stop = _float(jobs["end_e"])
    state = jobs["state"].to_list()
    ran = ~np.isnan(start)
    # a job still running at the end of the data ran at least until then
    run_s = np.where(ran, np.where(np.isnan(stop), float(end), stop) - start, np.nan)
    n_nodes = jobs["n_nodes"].cast(pl.Int64).to_numpy().copy()
    pinned = jobs["pinned"].to_numpy()
    retried = _retried_attempts(con, cluster, float(end), jobs["job_id"].to_list())
    for i, job_id in enumerate(jobs["job_id"].to_list() if retried else ()):
        found = retried.get(job_id)
        if found is not None and run_s[i] == run_s[i] and not pinned[i]:
            run_s[i] = min(found[0], float(run_s[i]))
            n_nodes[i] = found[1]
    submit = _float(jobs["submit_e"])
    if since is not None:
        # a job still pending when the period starts enters the replay's queue then, not at
        # its older submit: nothing but the jobs already running starts before `since`
        submit = np.where(pinned, submit, np.maximum(submit, since.timestamp()))
    # a job cancelled before it started leaves the queue when it was cancelled; where the
    # record does not say when (a trace's job killed before any attempt), at its submit: the
    # replay does not invent a run for a job that never ran and whose size is a guess
    cancel = np.array(
        [
            (max(e, sub) if e == e else sub)
            if (np.isnan(st) and st_name.upper().startswith(_CANCELLED))
            else np.inf
            for e, st, st_name, sub in zip(stop, start, state, submit, strict=True)
        ]
    )
    return Workload(
        job_id=jobs["job_id"].to_list(),
        submit_e=submit,
        run_s=np.maximum(run_s, 0.0),
        cancel_e=cancel,
        limit_s=_float(jobs["time_limit_s"]),
        gpus=jobs["gpus"].cast(pl.Int64).to_numpy(),
        n_nodes=n_nodes,
        partition=jobs["partition"].to_list(),
        account=jobs["account"].to_list(),
        user=jobs["user"].to_list(),
        gpu_type=[t or "" for t in jobs["gpu_type"].to_list()],
        real_start_e=start,
        nodes=nodes["node"].to_list(),
        node_gpus=nodes["gpus"].cast(pl.Int64).to_numpy(),
        node_model=nodes["model"].to_list(),
        node_partitions={k: frozenset(v) for k, v in seen.items()},
        horizon_e=horizon,
        pinned=pinned,
        job_nodes=jobs["nodes"].to_list(),
        cpus=_float(jobs["cpus"]),
        mem_mib=_float(jobs["mem_req_mib"]),
        qos=jobs["qos"].to_list(),
        origin_e=float("nan") if since is None else since.timestamp(),
    )


def _retried_attempts(
    con: duckdb.DuckDBPyConnection, cluster: str, end: float, job_ids: list[str]
) -> dict[str, tuple[float, int]]:
    """Per job that ran more than once (a trace's retried attempts: Philly's), the seconds its
    attempts held GPUs and the most nodes one attempt used. The replay runs such a job for that
    long on that many nodes — not from its first start to its last end (between attempts it
    was queued again) on every machine a retry moved to."""
    if not job_ids or not _has_table(con, "job_gpus"):
        return {}
    attempts = queries.run(
        con, "replay/attempts", cluster=cluster, end=dt.datetime.fromtimestamp(end, dt.UTC)
    )
    return {
        job_id: (float(held_s), max(int(nodes), 1))
        for job_id, _n, held_s, nodes, _gpus in attempts.iter_rows()
    }


_JOB_NUMBER = re.compile(r"^(\d+)")


def _in_slurm_order(jobs: pl.DataFrame) -> pl.DataFrame:
    """The jobs by submit time, then by job number as Slurm breaks a tie in priority (an
    array's tasks by their array job's number, then task): the engine breaks ties by position.
    The ids are strings, so the SQL's order puts job 10 before job 2."""
    numbers = [(int(m.group(1)) if (m := _JOB_NUMBER.match(j)) else -1, j) for j in jobs["job_id"]]
    keyed = jobs.with_columns(
        pl.Series("_number", [n for n, _ in numbers], dtype=pl.Int64),
        pl.Series("_task", [_task(j) for _, j in numbers], dtype=pl.Int64),
    )
    return keyed.sort(["submit_e", "_number", "_task", "job_id"], nulls_last=True).drop(
        "_number", "_task"
    )


def _task(job_id: str) -> int:
    """An array task's number (`123_4` → 4), else -1."""
    _, sep, rest = job_id.partition("_")
    m = _JOB_NUMBER.match(rest) if sep else None
    return int(m.group(1)) if m else -1


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = $name", {"name": name}
    ).fetchall()
    return bool(found[0][0])


def _shares(con: duckdb.DuckDBPyConnection, cluster: str) -> list[tuple[str, str]]:
    """Each leaf account's fair-share shares (`collect slurm-shares`/`slurm-config`),
    normalised down the account tree as Slurm's classic fair-share does (an account's part of
    its parent's part)."""
    if not _has_table(con, "associations"):
        return []
    tree = queries.run(con, "report/associations_latest", cluster=cluster).filter(
        pl.col("user").is_null()
    )
    raw = {a: float(s or 0) for a, s in zip(tree["account"], tree["raw_shares"], strict=True)}
    parent = dict(zip(tree["account"], tree["parent"], strict=True))
    siblings: dict[str | None, float] = {}
    for account, shares in raw.items():
        siblings[parent[account]] = siblings.get(parent[account], 0.0) + shares

    def part(account: str, depth: int = 0) -> float:
        total = siblings.get(parent[account], 0.0)
        own = raw[account] / total if total > 0 else 0.0
        up = parent[account]
        return own if up is None or up not in raw or depth > 64 else own * part(up, depth + 1)

    leaves = [a for a in raw if a not in siblings and a != "root"]
    return [(f"assoc.{a}.Shares", repr(part(a))) for a in leaves]


_NODE_SIZE = {"CPUTot": "CPUs", "RealMemory": "RealMemory"}  # scontrol's name → the setting's
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu=(\d+)")
_SCHEDULER_PARAMETERS = (
    "bf_window",
    "bf_interval",
    "bf_max_job_test",
    "bf_resolution",
    "default_queue_depth",
    "requeue_delay",
)
_QOS_KEYS = {
    "Priority": "Priority",
    "GrpTRES": "GrpTRES",
    "MaxTRESPU": "MaxTRESPerUser",
    "MaxWall": "MaxWall",
    "Preempt": "Preempt",
    "PreemptMode": "PreemptMode",
}


def _modelled_mode(key: str, value: str, *, qos: bool) -> bool:
    """Whether the replay models preemption mode `value` (SUSPEND is left out: no preemption)."""
    try:
        preempt_mode(key, value, qos=qos)
    except PolicyError:
        return False
    return True


def _qos_setting(name: str, key: str, value: str) -> tuple[str, str] | None:
    """One `sacctmgr show qos` field as a replay setting (None: nothing the replay models)."""
    target = f"qos.{name}.{_QOS_KEYS[key]}"
    if key in ("GrpTRES", "MaxTRESPU"):
        found = _GPU_TRES.search(value)
        return (target, f"gres/gpu={found.group(1)}") if found else None
    if key == "PreemptMode" and not _modelled_mode(target, value, qos=True):
        return None
    return target, value


def _config_settings(rows: pl.DataFrame) -> list[tuple[str, str]]:
    """The latest `scheduler_config` snapshot as replay settings (what the replay models)."""
    out: list[tuple[str, str]] = []
    select = [v for _, _, key, v, _ in rows.iter_rows() if key == "SelectTypeParameters"]
    memory = not select or "MEMORY" in str(select[0]).upper()
    for kind, name, key, value, _ in rows.iter_rows():
        if value is None:
            continue
        if kind == "config":
            if key.startswith("Priority") and key in _CONFIG_PRIORITY:
                out.append((f"priority.{key}", value))
            elif key == "BOOT_TIME":
                out.append(("boot_time", value))
            elif key == "PreemptType" and value in ("preempt/none", "preempt/qos"):
                out.append((key, value))
            elif key == "PreemptMode" and _modelled_mode(key, value, qos=False):
                out.append((key, value))
            elif key == "SchedulerParameters":
                for item in value.split(","):
                    k, sep, v = item.strip().partition("=")
                    if sep and k in _SCHEDULER_PARAMETERS:
                        out.append((k, v))
        elif kind == "partition" and key in ("MaxTime", "PriorityTier", "Nodes"):
            out.append((f"partition.{name}.{key}", value))
        elif kind == "node" and key == "Gres":
            gpu = next((g for g in value.split(",") if g.startswith("gpu:")), None)
            if gpu:
                out.append((f"node.{name}.Gres", re.sub(r"\(.*\)$", "", gpu)))
        elif kind == "node" and key in _NODE_SIZE and value.isdigit():
            # Slurm's RealMemory of 1 is its default (memory not configured); memory binds
            # only where SelectTypeParameters makes it a consumable resource (CR_*_Memory)
            known = int(value) > 0 if key == "CPUTot" else int(value) > 1 and memory
            if known:
                out.append((f"node.{name}.{_NODE_SIZE[key]}", value))
        elif kind == "node" and key == "State" and ("DRAIN" in value or "DOWN" in value):
            out.append((f"node.{name}.State", "DRAIN"))
        elif kind == "qos" and key in _QOS_KEYS:
            setting = _qos_setting(name, key, value)
            if setting is not None:
                out.append(setting)
        elif kind == "assoc" and key in ("GrpTRES", "MaxTRESPU"):
            found = _GPU_TRES.search(value)
            if found:
                target = "GrpTRES" if key == "GrpTRES" else "MaxTRESPerUser"
                out.append((f"assoc.{name}.{target}", f"gres/gpu={found.group(1)}"))
    return out


_CONFIG_PRIORITY = {
    "PriorityType",
    "PriorityWeightAge",
    "PriorityWeightFairShare",
    "PriorityWeightFairshare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityMaxAge",
    "PriorityDecayHalfLife",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityCalcPeriod",
}


def recorded_settings(con: duckdb.DuckDBPyConnection, cluster: str) -> list[tuple[str, str]]:
    """What the lake recorded of the cluster's policy, as replay settings: the latest
    `collect slurm-config` snapshot (with its QOS: priority, GPU limits, MaxWall, preemption;
    a preemption mode the replay does not model, SUSPEND, is left out: no preemption), and the
    fair-share shares of the account tree."""
    settings: list[tuple[str, str]] = []
    if _has_table(con, "scheduler_config"):
        settings += _config_settings(
            queries.run(con, "replay/scheduler_config_latest", cluster=cluster)
        )
    return settings + _shares(con, cluster)


def check_changes(w: Workload, recorded: Policy, changes: Sequence[str]) -> None:
    """Raise PolicyError for `changes` that name a node, partition, account, user association
    or QOS the workload's cluster does not have, or set shares off the recorded share tree's
    scale, or a partition's `MaxTime` or `Nodes` where no job of the period is in it: such a
    change replays as no change, and the proposal's figures read as the baseline's."""
    partitions = {
        *w.partition,
        *(p for seen in w.node_partitions.values() for p in seen),
        *recorded.partitions,
    } - {""}  # (a job that records no partition names none)
    unknown_names(changes, [*w.nodes, *recorded.node_gres], partitions, _no_partition(w, recorded))
    _partitions_without_jobs(w, recorded, changes)
    unknown_associations(
        changes,
        accounts={*w.account, *recorded.shares, *recorded.account_gpu_cap, *recorded.user_gpu_cap},
        users={*zip(w.account, w.user, strict=True), *recorded.assoc_user_gpu_cap},
        qos={*(q for q in w.qos or () if q), *recorded.qos, "normal"},
    )
    shares_on_the_recorded_scale(recorded, changes)


def _no_partition(w: Workload, recorded: Policy) -> str:
    """What to do where the period's jobs record no partition and no default partition takes
    them (a trace's jobs, Philly's, name none): a partition's setting reaches none of them."""
    if any(w.partition) or recorded.default_partition:
        return ""
    return (
        "the cluster's jobs record no partition (a trace's, such as Philly's, name none), so a "
        "partition's setting reaches none of them — give the cluster's slurm.conf with "
        "--slurm-conf (its Default=YES partition takes the jobs that name none, as Slurm does), "
        "or set a time limit on every job with qos.normal.MaxWall (a job with no recorded QOS "
        "is in normal)"
    )


def _partitions_without_jobs(w: Workload, recorded: Policy, changes: Sequence[str]) -> None:
    """Raise PolicyError for a partition's `MaxTime` or `Nodes` where no job the period replays
    is in that partition (jobs that record none: in the default partition, as recorded or as
    proposed), so the change would replay as no change."""
    named = [
        parts
        for parts in (item.partition("=")[0].strip().split(".") for item in changes)
        if len(parts) == 3 and parts[0] == "partition" and parts[2] in ("MaxTime", "Nodes")
    ]
    if not named:
        return
    replayed = np.ones(w.size, dtype=bool) if w.pinned is None else ~w.pinned.astype(bool)
    proposed = apply_settings(recorded, changes)
    holding = {
        p
        for policy in (recorded, proposed)
        for p, mine in zip(in_default_partition(w, policy).partition, replayed, strict=True)
        if mine
    }
    for parts in named:
        if parts[1] in holding:
            continue
        said = []
        some = sorted(holding - {""})
        if some:
            said.append(f"its jobs are in {', '.join(some[:8])}{', …' if len(some) > 8 else ''}")
        lost = sum(1 for p, mine in zip(w.partition, replayed, strict=True) if mine and not p)
        if lost and not (recorded.default_partition or proposed.default_partition):
            said.append(
                f"{lost:,} of its jobs record no partition and no default partition takes "
                "them: mark one Default=YES in --slurm-conf, as Slurm's slurm.conf does"
            )
        raise PolicyError(
            f"{'.'.join(parts)}: no job of the period is in partition {parts[1]!r}"
            + (f" ({'; '.join(said)})" if said else "")
            + ": the change would replay as no change"
        )
