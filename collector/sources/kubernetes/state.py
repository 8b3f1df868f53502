"""The Kubernetes collector's state in `<lake>/_state/kubernetes.sqlite`: what was landed, by hash.

Updated in place and transactionally (DESIGN §3): a run opens one `BEGIN IMMEDIATE`
transaction, so two collectors on one lake take turns, and a run that fails changes nothing.

* `checkpoint`: per cluster, when the last successful collection was made.
* `pod`: per job (`<namespace>/<pod>`), the hash of the row last landed, whether the pod had
  finished, and the row itself, so that a pod that disappears before it finished can be
  landed once more as ended (its last row with a final state and end time).
* `queue`: per `queues` row key, the hash of the version last landed and the row itself, so a
  queue that disappears gets one `deleted` version.
* `job_gpu`: every `whole-node` `job_gpus` row landed, with the batch it was landed in;
  closing a row re-lands that batch, so a row is never left open beside its closed copy.
* `job_outbox`: a run's `jobs` rows, committed with the pods' state before they land and
  dropped once they have; a run killed in between has them landed by the next, under their own
  batch id (which replaces what landed): each pod the state knows has its row in the lake.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.state import arrow_blob, state_transaction
from warehouse import state_files

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["STATE_FILE", "KubernetesState", "StoredPod", "WholeNodeRow", "open_state"]

STATE_FILE = state_files.KUBERNETES.name


@dataclass(frozen=True, slots=True)
class StoredPod:
    """What the state remembers of one pod's job."""

    job_id: str
    namespace: str
    pod_uid: str | None
    content_hash: str
    finished: bool
    gone_state: str
    workload: str | None  # `<namespace>/<name>` of its Kueue Workload
    row: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WholeNodeRow:
    """One `whole-node` `job_gpus` row: `job_id` held every GPU of `node` from `start_ms` on."""

    job_id: str
    node: str
    start_ms: int
    end_ms: int | None


class KubernetesState:
    """Reads and writes of the state database, inside the caller's open transaction."""

    def __init__(self, con: sqlite3.Connection, cluster: str) -> None:
        self._con = con
        self.cluster = cluster

    # ---- checkpoint

    def checkpoint_ms(self) -> int | None:
        row = self._con.execute(
            "SELECT collected_ms FROM checkpoint WHERE cluster = ?", (self.cluster,)
        ).fetchone()
        return None if row is None else int(row[0])

    def set_checkpoint(self, collected_ms: int) -> None:
        self._con.execute(
            "INSERT INTO checkpoint (cluster, collected_ms) VALUES (?, ?) "
            "ON CONFLICT (cluster) DO UPDATE SET collected_ms = excluded.collected_ms",
            (self.cluster, collected_ms),
        )

    # ---- pods

    def pods(self, job_ids: Iterable[str]) -> dict[str, StoredPod]:
        """The stored state of each of `job_ids` that the state knows."""
        out: dict[str, StoredPod] = {}
        ids = list(dict.fromkeys(job_ids))
        for at in range(0, len(ids), 500):
            chunk = ids[at : at + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._con.execute(
                "SELECT job_id, namespace, pod_uid, content_hash, finished, gone_state, workload, "
                f"row_json FROM pod WHERE cluster = ? AND job_id IN ({marks})",  # marks: '?'s
                (self.cluster, *chunk),
            )
            for row in rows:
                out[row[0]] = _stored_pod(row)
        return out

    def stage_jobs(self, batch_id: str, rows: pa.Table) -> None:
        """Keep the `jobs` rows of `batch_id` until `drop_staged` (they land after commit)."""
        self._con.execute(
            "INSERT OR REPLACE INTO job_outbox VALUES (?, ?, ?)",
            (batch_id, self.cluster, arrow_blob(rows)),
        )

    def staged_jobs(self) -> list[tuple[str, pa.Table]]:
        """The `jobs` batches staged and not dropped (a run killed before landing them)."""
        import pyarrow as pa

        found = self._con.execute(
            "SELECT batch_id, rows FROM job_outbox WHERE cluster = ? ORDER BY batch_id",
            (self.cluster,),
        ).fetchall()
        return [(batch, pa.ipc.open_stream(blob).read_all()) for batch, blob in found]

    def drop_staged(self, batch_id: str) -> None:
        self._con.execute("DELETE FROM job_outbox WHERE batch_id = ?", (batch_id,))

    def unfinished_pods(self) -> list[StoredPod]:
        """Every pod last seen unfinished."""
        rows = self._con.execute(
            "SELECT job_id, namespace, pod_uid, content_hash, finished, gone_state, workload, "
            "row_json FROM pod WHERE cluster = ? AND finished = 0 ORDER BY job_id",
            (self.cluster,),
        )
        return [_stored_pod(row) for row in rows]

    def save_pod(
        self,
        job_id: str,
        namespace: str,
        pod_uid: str | None,
        content_hash: str,
        finished: bool,
        gone_state: str,
        workload: str | None,
        row: dict[str, Any],
    ) -> None:
        self._con.execute(
            "INSERT INTO pod (cluster, job_id, namespace, pod_uid, content_hash, finished, "
            "gone_state, workload, row_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (cluster, job_id) DO UPDATE SET namespace = excluded.namespace, "
            "pod_uid = excluded.pod_uid, content_hash = excluded.content_hash, "
            "finished = excluded.finished, gone_state = excluded.gone_state, "
            "workload = excluded.workload, row_json = excluded.row_json",
            (
                self.cluster,
                job_id,
                namespace,
                pod_uid,
                content_hash,
                int(finished),
                gone_state,
                workload,
                json.dumps(row, sort_keys=True),
            ),
        )

    # ---- queues

    def queue_hashes(self) -> dict[str, tuple[str, bool]]:
        """row key -> (hash of the version last landed, whether it was a deletion)."""
        rows = self._con.execute(
            "SELECT row_key, content_hash, deleted FROM queue WHERE cluster = ?", (self.cluster,)
        )
        return {key: (digest, bool(deleted)) for key, digest, deleted in rows}

    def live_queues(self) -> list[dict[str, Any]]:
        """The rows of every queue not landed as deleted."""
        rows = self._con.execute(
            "SELECT row_json FROM queue WHERE cluster = ? AND deleted = 0 ORDER BY row_key",
            (self.cluster,),
        )
        return [json.loads(r[0]) for r in rows]

    def save_queue(
        self, row_key: str, kind: str, namespace: str | None, digest: str, row: dict[str, Any]
    ) -> None:
        self._con.execute(
            "INSERT INTO queue (cluster, row_key, kind, namespace, content_hash, deleted, "
            "row_json) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (cluster, row_key) DO UPDATE SET content_hash = excluded.content_hash, "
            "deleted = excluded.deleted, row_json = excluded.row_json",
            (
                self.cluster,
                row_key,
                kind,
                namespace,
                digest,
                int(bool(row.get("deleted"))),
                json.dumps(row, sort_keys=True),
            ),
        )

    # ---- whole-node job_gpus rows

    def open_gpu_rows(self) -> list[tuple[WholeNodeRow, str]]:
        """Every row still open (end unknown), with the batch it was landed in."""
        rows = self._con.execute(
            "SELECT job_id, node, start_ms, end_ms, batch_id FROM job_gpu "
            "WHERE cluster = ? AND end_ms IS NULL ORDER BY job_id, node, start_ms",
            (self.cluster,),
        )
        return [(WholeNodeRow(*r[:4]), r[4]) for r in rows]

    def has_gpu_row(self, row: WholeNodeRow) -> bool:
        found = self._con.execute(
            "SELECT 1 FROM job_gpu WHERE cluster = ? AND job_id = ? AND node = ? AND start_ms = ?",
            (self.cluster, row.job_id, row.node, row.start_ms),
        ).fetchone()
        return found is not None

    def add_gpu_row(self, row: WholeNodeRow, batch_id: str) -> None:
        self._con.execute(
            "INSERT OR IGNORE INTO job_gpu (cluster, job_id, node, start_ms, end_ms, batch_id) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (self.cluster, row.job_id, row.node, row.start_ms, row.end_ms, batch_id),
        )

    def close_gpu_row(self, row: WholeNodeRow, end_ms: int) -> None:
        self._con.execute(
            "UPDATE job_gpu SET end_ms = ? WHERE cluster = ? AND job_id = ? AND node = ? "
            "AND start_ms = ?",
            (end_ms, self.cluster, row.job_id, row.node, row.start_ms),
        )

    def gpu_rows_of_batch(self, batch_id: str) -> list[WholeNodeRow]:
        """Every row landed in `batch_id`, as it stands now (to re-land the batch whole)."""
        rows = self._con.execute(
            "SELECT job_id, node, start_ms, end_ms FROM job_gpu WHERE cluster = ? AND batch_id = ? "
            "ORDER BY job_id, node, start_ms",
            (self.cluster, batch_id),
        )
        return [WholeNodeRow(*r) for r in rows]


def _stored_pod(row: tuple[Any, ...]) -> StoredPod:
    job_id, namespace, uid, digest, finished, gone_state, workload, row_json = row
    return StoredPod(
        job_id, namespace, uid, digest, bool(finished), gone_state, workload, json.loads(row_json)
    )


@contextmanager
def open_state(root: Path, cluster: str, timeout_s: float = 30.0) -> Iterator[KubernetesState]:
    """Open the state of `cluster` in one write transaction: committed only if the body succeeds.

    Raises CollectorError when another collector holds the database longer than `timeout_s`.
    """
    with state_transaction(
        root, state_files.KUBERNETES, "gpuledger collect kubernetes", timeout_s
    ) as con:
        yield KubernetesState(con, cluster)
