"""The Slurm collector's state in `<lake>/_state/slurm.sqlite`: checkpoints, job hashes, GPU rows.

Updated in place and transactionally (DESIGN §3): a run opens one `BEGIN IMMEDIATE`
transaction, so two collectors on one lake take turns, and a run that fails changes nothing.

* `checkpoint`: per cluster, the end of the last window that was collected and landed.
* `job`: per job, the hash of the content last landed (a new version lands only when it
  differs), whether it has finished (unfinished jobs are asked for by id on the next run), and
  values that must not go backwards between versions (requeue count, first submit time).
* `job_gpu`: every `job_gpus` row landed, with the batch it was landed in; closing a row
  (setting its end) re-lands that batch, so a row is never left open beside its closed copy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from collector.sources.slurm.scontrol import JobGpu
from collector.state import state_transaction
from warehouse import state_files

__all__ = ["STATE_FILE", "SlurmState", "StoredJob", "open_state"]

STATE_FILE = state_files.SLURM.name
_NO_INDEX = -1  # gpu_index of a whole-node row in the key (NULLs are never equal in SQLite)


@dataclass(frozen=True, slots=True)
class StoredJob:
    """What the state remembers of one job."""

    content_hash: str
    finished: bool
    requeues: int
    submit_ms: int | None


def _row(job_id: str, node: str, index: int, start: int, end: int | None, mapping: str) -> JobGpu:
    return JobGpu(job_id, node, None if index == _NO_INDEX else index, start, end, mapping)


class SlurmState:
    """Reads and writes of the state database, inside the caller's open transaction."""

    def __init__(self, con: sqlite3.Connection, cluster: str) -> None:
        self._con = con
        self.cluster = cluster

    # ---- checkpoint

    def checkpoint_ms(self) -> int | None:
        row = self._con.execute(
            "SELECT window_end_ms FROM checkpoint WHERE cluster = ?", (self.cluster,)
        ).fetchone()
        return None if row is None else int(row[0])

    def set_checkpoint(self, window_end_ms: int, now_ms: int) -> None:
        self._con.execute(
            "INSERT INTO checkpoint (cluster, window_end_ms, updated_ms) VALUES (?, ?, ?) "
            "ON CONFLICT (cluster) DO UPDATE SET window_end_ms = excluded.window_end_ms, "
            "updated_ms = excluded.updated_ms",
            (self.cluster, window_end_ms, now_ms),
        )

    # ---- jobs

    def jobs(self, job_ids: Iterable[str]) -> dict[str, StoredJob]:
        """The stored state of each of `job_ids` that the state knows."""
        out: dict[str, StoredJob] = {}
        ids = list(dict.fromkeys(job_ids))
        for at in range(0, len(ids), 500):
            chunk = ids[at : at + 500]
            marks = ",".join("?" * len(chunk))
            for job_id, digest, finished, requeues, submit in self._con.execute(
                "SELECT job_id, content_hash, finished, requeues, submit_ms FROM job "
                f"WHERE cluster = ? AND job_id IN ({marks})",  # marks: only '?'s
                (self.cluster, *chunk),
            ):
                out[job_id] = StoredJob(digest, bool(finished), int(requeues), submit)
        return out

    def unfinished_job_ids(self, max_missing_runs: int) -> list[str]:
        """Jobs last seen unfinished, unless sacct has not listed them for that many runs."""
        rows = self._con.execute(
            "SELECT job_id FROM job WHERE cluster = ? AND finished = 0 AND missing_runs < ? "
            "ORDER BY job_id",
            (self.cluster, max_missing_runs),
        )
        return [r[0] for r in rows]

    def save_job(
        self, job_id: str, digest: str, finished: bool, requeues: int, submit_ms: int | None
    ) -> None:
        self._con.execute(
            "INSERT INTO job (cluster, job_id, content_hash, finished, requeues, submit_ms, "
            "missing_runs) VALUES (?, ?, ?, ?, ?, ?, 0) "
            "ON CONFLICT (cluster, job_id) DO UPDATE SET content_hash = excluded.content_hash, "
            "finished = excluded.finished, requeues = excluded.requeues, "
            "submit_ms = excluded.submit_ms, missing_runs = 0",
            (self.cluster, job_id, digest, int(finished), requeues, submit_ms),
        )

    def mark_asked(self, found: Iterable[str], missing: Iterable[str]) -> None:
        """Count the runs in which sacct did not list a job asked for by id (reset when found)."""
        self._con.executemany(
            "UPDATE job SET missing_runs = 0 WHERE cluster = ? AND job_id = ?",
            [(self.cluster, j) for j in found],
        )
        self._con.executemany(
            "UPDATE job SET missing_runs = missing_runs + 1 WHERE cluster = ? AND job_id = ?",
            [(self.cluster, j) for j in missing],
        )

    # ---- job_gpus rows

    def open_gpu_rows(self) -> list[tuple[JobGpu, str]]:
        """Every row still open (end unknown), with the batch it was landed in."""
        rows = self._con.execute(
            "SELECT job_id, node, gpu_index, start_ms, end_ms, mapping, batch_id FROM job_gpu "
            "WHERE cluster = ? AND end_ms IS NULL ORDER BY job_id, node, gpu_index, start_ms",
            (self.cluster,),
        )
        return [(_row(*r[:6]), r[6]) for r in rows]

    def open_gpu_job_ids(self) -> list[str]:
        """Jobs with a `job_gpus` row still open."""
        rows = self._con.execute(
            "SELECT DISTINCT job_id FROM job_gpu WHERE cluster = ? AND end_ms IS NULL "
            "ORDER BY job_id",
            (self.cluster,),
        )
        return [r[0] for r in rows]

    def has_gpu_row(self, row: JobGpu) -> bool:
        index = _NO_INDEX if row.gpu_index is None else row.gpu_index
        found = self._con.execute(
            "SELECT 1 FROM job_gpu WHERE cluster = ? AND job_id = ? AND node = ? "
            "AND gpu_index = ? AND start_ms = ?",
            (self.cluster, row.job_id, row.node, index, row.start_ts),
        ).fetchone()
        return found is not None

    def add_gpu_row(self, row: JobGpu, batch_id: str) -> None:
        index = _NO_INDEX if row.gpu_index is None else row.gpu_index
        self._con.execute(
            "INSERT OR IGNORE INTO job_gpu (cluster, job_id, node, gpu_index, start_ms, end_ms, "
            "mapping, batch_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.cluster,
                row.job_id,
                row.node,
                index,
                row.start_ts,
                row.end_ts,
                row.mapping,
                batch_id,
            ),
        )

    def close_gpu_row(self, row: JobGpu, end_ms: int) -> None:
        index = _NO_INDEX if row.gpu_index is None else row.gpu_index
        self._con.execute(
            "UPDATE job_gpu SET end_ms = ? WHERE cluster = ? AND job_id = ? AND node = ? "
            "AND gpu_index = ? AND start_ms = ?",
            (end_ms, self.cluster, row.job_id, row.node, index, row.start_ts),
        )

    def gpu_rows_of_batch(self, batch_id: str) -> list[JobGpu]:
        """Every row landed in `batch_id`, as it stands now (to re-land the batch whole)."""
        rows = self._con.execute(
            "SELECT job_id, node, gpu_index, start_ms, end_ms, mapping FROM job_gpu "
            "WHERE cluster = ? AND batch_id = ? ORDER BY job_id, node, gpu_index, start_ms",
            (self.cluster, batch_id),
        )
        return [_row(*r) for r in rows]


@contextmanager
def open_state(root: Path, cluster: str, timeout_s: float = 30.0) -> Iterator[SlurmState]:
    """Open the state of `cluster` in one write transaction: committed only if the body succeeds.

    Raises CollectorError when another collector holds the database longer than `timeout_s`.
    """
    with state_transaction(root, state_files.SLURM, "gpuledger collect slurm", timeout_s) as con:
        yield SlurmState(con, cluster)
