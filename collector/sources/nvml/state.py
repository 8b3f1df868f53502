"""What the NVML agent remembers between ticks and runs, and how job intervals advance.

State lives in `<spool>/_state/nvml_agent.json` (small, rewritten atomically each tick) so that
`--once` runs started from cron extend the same `job_gpus` intervals as a long-running agent.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from warehouse import layout

__all__ = ["AgentState", "IntervalKey", "OpenInterval", "Slot", "advance_intervals"]

logger = logging.getLogger(__name__)

Slot = tuple[str, int | None]  # (GPU UUID, MIG GPU-instance id)
IntervalKey = tuple[str, str, int | None]  # (job_id, GPU UUID, MIG GPU-instance id)


@dataclass(slots=True)
class OpenInterval:
    """A job's current run on one GPU (or MIG instance), in epoch ms."""

    job_id: str
    gpu_uuid: str
    mig_instance: int | None
    gpu_index: int | None
    start_ms: int
    last_ms: int

    @property
    def key(self) -> IntervalKey:
        return (self.job_id, self.gpu_uuid, self.mig_instance)


@dataclass(slots=True)
class AgentState:
    """What the agent remembers between ticks and runs (`<spool>/_state/nvml_agent.json`)."""

    intervals: dict[IntervalKey, OpenInterval] = field(default_factory=dict)
    first_seen: dict[str, int] = field(default_factory=dict)  # GPU UUID → ms
    index: dict[str, int] = field(default_factory=dict)  # GPU UUID → last NVML index
    xid_last: dict[str, int] = field(default_factory=dict)
    offline: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path, owner: str) -> AgentState:
        """The state saved at `path` by the agent of `owner` (cluster/node), else a fresh one."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("owner") != owner:
                return cls()
            intervals = [OpenInterval(**i) for i in raw["intervals"]]
            return cls(
                intervals={i.key: i for i in intervals},
                first_seen={k: int(v) for k, v in raw["first_seen"].items()},
                index={k: int(v) for k, v in raw["index"].items()},
                xid_last={k: int(v) for k, v in raw["xid_last"].items()},
                offline=set(raw["offline"]),
            )
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("%s: unreadable agent state, starting afresh: %s", path, exc)
            return cls()

    def save(self, path: Path, owner: str) -> None:
        """Write the state for `owner` atomically (temporary file, rename)."""
        raw = {
            "owner": owner,
            "intervals": [
                {
                    "job_id": i.job_id,
                    "gpu_uuid": i.gpu_uuid,
                    "mig_instance": i.mig_instance,
                    "gpu_index": i.gpu_index,
                    "start_ms": i.start_ms,
                    "last_ms": i.last_ms,
                }
                for i in self.intervals.values()
            ],
            "first_seen": self.first_seen,
            "index": self.index,
            "xid_last": self.xid_last,
            "offline": sorted(self.offline),
        }
        # a new file of a random name: the spool's folders are its group's to write too
        fd, tmp = layout.create_temp(path)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(raw, sort_keys=True))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)  # renamed into place already, unless the write failed


def advance_intervals(
    intervals: dict[IntervalKey, OpenInterval],
    slot_jobs: dict[Slot, list[str]],
    unreadable: set[Slot],
    index: dict[str, int],
    ts_ms: int,
    max_gap_ms: int,
) -> list[OpenInterval]:
    """Extend or open the interval of every (job, slot) seen at `ts_ms`; close the others.

    `slot_jobs` holds the jobs seen on each slot whose processes were listed. An interval last
    seen more than `max_gap_ms` ago is not extended: a new one starts, as it does when the clock
    went back before the interval's start (a step of the system clock). A slot whose process list
    could not be read (`unreadable`) keeps its intervals open without extending them, so one
    failed call does not split a job's run. Returns the intervals seen now (to be rewritten);
    closed ones are dropped from `intervals`, their last version standing as written.
    """
    touched: list[OpenInterval] = []
    seen: set[IntervalKey] = set()
    for (uuid, gi), jobs in sorted(slot_jobs.items(), key=lambda s: (s[0][0], s[0][1] or 0)):
        for job in jobs:
            key = (job, uuid, gi)
            seen.add(key)
            interval = intervals.get(key)
            # a clock stepped back before the interval's start: a new one (the old stands as
            # written), else the samples from now on fall outside every interval of the job
            if (
                interval is None
                or ts_ms - interval.last_ms > max_gap_ms
                or ts_ms < interval.start_ms
            ):
                interval = OpenInterval(job, uuid, gi, index.get(uuid), ts_ms, ts_ms)
                intervals[key] = interval
            interval.last_ms = max(interval.last_ms, ts_ms)
            touched.append(interval)
    for key, interval in list(intervals.items()):
        waiting = (key[1], key[2]) in unreadable and ts_ms - interval.last_ms <= max_gap_ms
        if key not in seen and not waiting:
            del intervals[key]
    return touched
