"""Retention: the raw samples of old days retire into their derived partitions.

A day's sample-level partitions (`gpu_job_buckets`, the 5-minute per-GPU-per-job buckets, and
the marts built from it: warehouse/partitions.py) hold every figure the summary marts, the
reports and the dashboard read. Once they are built from the day's samples as they are now and
checked, the day's raw sample files can go: `prune_raw_samples` deletes the sample files of the
days older than the newest `keep_days` of each cluster's data (the end of the data, never the
wall clock), and records each such day as pruned, so the per-day pass keeps its partitions
instead of dropping them as a day whose samples disappeared.

A day is pruned only when all of these hold, else it is kept and the reason given:

- its partitions were built from exactly its files and owners now, and the next day's files
  (whose first samples end its last spans) as they are now (`sample_days_built` matches what
  a build would record now);
- its `gpu_job_buckets` partition exists, and so does each other sample-level mart's where
  its buckets give that mart rows, and every file of every sample-level mart of the day
  decodes (warehouse/damage.py);
- the buckets count every sample of the day: the sum of their `samples` equals the rows of the
  day's sample files that fall on the day;
- the day before is not kept for one of the reasons above (its build again reads this day's
  first samples, which end its last spans).

Only `gpu_samples` is pruned: the other raw tables are small (jobs, allocations, events) and the
summary marts read them. Figures of pruned days stay as they were built: a scheduler record
that arrives for a pruned day later changes the job-level figures it feeds, not the day's
buckets (there are no samples left to give owners again). A pruned day is frozen: sample files
that land in it later (or that a prune cut short left) are not read by the per-day pass, since
nothing says they hold all of the day's samples, and the next prune removes them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from warehouse import damage, layout
from warehouse.connection import WarehouseConfig, open_engine, register_files
from warehouse.partitions import (
    PRUNED,
    SAMPLE_MARTS,
    DayKey,
    built_days,
    current_inputs,
    mark_pruned,
    sample_days,
)
from warehouse.writer_lock import writer_step

__all__ = ["DayPrune", "PrunePlan", "plan_raw_prune", "prune_raw_samples"]


@dataclass(frozen=True, slots=True)
class DayPrune:
    """One day's raw sample files, and what they hold."""

    key: DayKey
    files: tuple[Path, ...]
    bytes: int
    samples: int


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """The old days whose samples go (`prune`) and those kept, each with why (`kept`)."""

    prune: tuple[DayPrune, ...]
    kept: tuple[tuple[DayKey, str], ...]

    @property
    def bytes(self) -> int:
        return sum(day.bytes for day in self.prune)


def _old_days(days: Mapping[DayKey, list[Path]], keep_days: int) -> list[DayKey]:
    """The days of each cluster folder older than its newest `keep_days` days of samples."""
    last: dict[str, dt.date] = {}
    for cluster, day in days:
        last[cluster] = max(day, last.get(cluster, day))
    return sorted(
        (cluster, day)
        for cluster, day in days
        if day.toordinal() <= last[cluster].toordinal() - keep_days
    )


def _day_folder(root: Path, table: str, key: DayKey) -> Path:
    return layout.table_dir(root, table) / f"cluster={key[0]}" / f"date={key[1].isoformat()}"


def _check(config: WarehouseConfig, key: DayKey, files: list[Path]) -> tuple[str, int]:
    """Why `key`'s derived partitions cannot stand for its samples ('' when they can), and the
    day's samples."""
    root = config.root
    buckets = sorted(_day_folder(root, SAMPLE_MARTS[0][0], key).glob("*.parquet"))
    if not buckets:
        return "its gpu_job_buckets partition is missing", 0
    for mart, _ in SAMPLE_MARTS:
        for path in sorted(_day_folder(root, mart, key).glob("*.parquet")):
            if damage.unreadable(path):
                return f"{path.relative_to(root)} does not decode", 0
    con = open_engine(config)
    try:
        register_files(con, "gpu_samples", files, view="day_samples")
        register_files(con, SAMPLE_MARTS[0][0], buckets, view="day_buckets")
        [(samples,)] = con.execute(
            "SELECT count(*) FROM day_samples WHERE CAST(ts AS DATE) = $day", {"day": key[1]}
        ).fetchall()
        [(counted, owned, with_energy, rows)] = con.execute(
            "SELECT coalesce(sum(samples), 0), count(*) FILTER (WHERE job_id IS NOT NULL), "
            "count(*) FILTER (WHERE job_id IS NOT NULL AND energy_j IS NOT NULL), count(*) "
            "FROM day_buckets"
        ).fetchall()
    finally:
        con.close()
    if counted != samples:
        return f"its buckets count {counted:,} samples, its files hold {samples:,}", samples
    # the marts built from the buckets have rows where these buckets are (sql/marts/): a
    # partition missing is figures that only a build from the samples would give back
    needed = {"job_gpu_daily": owned, "job_energy_hourly": with_energy, "bucket_occupancy": rows}
    for mart, _ in SAMPLE_MARTS[1:]:
        if needed[mart] and not any(_day_folder(root, mart, key).glob("*.parquet")):
            return f"its {mart} partition is missing", samples
    return "", samples


def plan_raw_prune(
    config: WarehouseConfig, params: Mapping[str, float | int], keep_days: int
) -> PrunePlan:
    """Which days' raw samples `prune_raw_samples` would delete, and which old days it keeps.

    `params`: the attribution config's values (`AttributionConfig.values()`), which the day
    partitions were built with: a day built with others is not up to date, so it is kept.
    """
    root = config.root
    days = sample_days(root)
    old = _old_days(days, keep_days)
    if not old:
        return PrunePlan((), ())
    built = built_days(root)
    now = current_inputs(config, params, days)
    prune: list[DayPrune] = []
    kept: list[tuple[DayKey, str]] = []
    unbuilt: set[DayKey] = set()  # kept for what its own partitions lack
    for key in old:
        was = built.get(key)
        size = sum(path.stat().st_size for path in days[key])
        if was is not None and was[0] == PRUNED:  # files left by a prune cut short, or landed
            prune.append(DayPrune(key, tuple(days[key]), size, 0))  # since: its record stands
            continue
        why, samples = "", 0
        if was is None or was[0] != now[key][0]:
            why = "its partitions are not built from its samples as they are now"
        elif was[1] != now[key][1]:
            why = "the next day's samples changed since its partitions were built"
        else:
            why, samples = _check(config, key, days[key])
        if why:
            unbuilt.add(key)
            kept.append((key, why))
        elif (key[0], key[1] - dt.timedelta(days=1)) in unbuilt:
            # the day before is to be built again: its last spans end at this day's first samples
            kept.append((key, f"{key[1] - dt.timedelta(days=1)} is kept to be built again"))
        else:
            prune.append(DayPrune(key, tuple(days[key]), size, samples))
    return PrunePlan(tuple(prune), tuple(kept))


@writer_step("prune")
def prune_raw_samples(
    root: Path,
    params: Mapping[str, float | int],
    keep_days: int,
    *,
    dry_run: bool = False,
    warehouse: WarehouseConfig | None = None,
) -> PrunePlan:
    """Delete the raw sample files of the days `plan_raw_prune` finds ready; return the plan.

    With `dry_run` nothing changes. Each day is recorded as pruned before its files go, so a
    crash in between leaves a pruned day with files that attribute does not read (the day is
    frozen) and the next prune removes, never a day whose partitions are dropped. Holds the
    writer lock: no attribute runs meanwhile. `warehouse` sets the memory limit of the checks.
    """
    plan = plan_raw_prune(warehouse or WarehouseConfig(root=root), params, keep_days)
    if dry_run:
        return plan
    for day in plan.prune:
        with layout.table_lock(root, "gpu_samples"):
            mark_pruned(root, day.key, int(params["bucket_s"]))
            for path in day.files:
                path.unlink(missing_ok=True)
            folder = _day_folder(root, "gpu_samples", day.key)
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
    return plan
