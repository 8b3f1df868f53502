"""Findings as the alerter sees them: the latest version of each, with its job's context.

Reads `sql/alerts/findings_context.sql` through `warehouse.queries`; a finding "changes" when its
severity, GPU-hours at stake or end time moves (its `fingerprint`).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from detectors.names import EARLY_WASTE, RUNTIME_QUANTILES

if TYPE_CHECKING:
    import duckdb

__all__ = ["QUERY", "SEVERITY_RANK", "FindingContext", "load_findings"]

QUERY = "alerts/findings_context"
SEVERITY_RANK = {"info": 0, "warn": 1, "critical": 2}
HARDWARE_SUBJECTS = frozenset({"gpu", "node"})
RUNNING_STATES = frozenset({"RUNNING", "running", "Running"})


@dataclass(frozen=True, slots=True)
class FindingContext:
    """One finding plus what a message about it shows (job, GPU activity, the user's rank)."""

    cluster: str
    finding_id: str
    detector: str
    severity: str
    subject_kind: str
    subject_id: str
    detected_ts: dt.datetime
    job_id: str | None = None
    user: str | None = None
    account: str | None = None
    node: str | None = None
    gpu_uuid: str | None = None
    start_ts: dt.datetime | None = None
    end_ts: dt.datetime | None = None
    predicted: bool | None = None
    score: float | None = None
    gpu_h_at_stake: float | None = None
    message: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    job_name: str | None = None
    job_id_raw: str | None = None  # a pod's UID; the Slurm job id without array/het suffix
    job_submit_ts: dt.datetime | None = None  # what the action compares with the scheduler's
    partition: str | None = None
    job_state: str | None = None
    interactive: bool | None = None
    job_start_ts: dt.datetime | None = None
    job_end_ts: dt.datetime | None = None
    time_limit_s: int | None = None
    gpus: int | None = None
    nodes: tuple[str, ...] = ()
    alloc_gpu_h: float | None = None
    idle_gpu_h: float | None = None
    busy_mean: float | None = None
    gpu_util_pct_mean: float | None = None
    sm_active_mean: float | None = None
    fb_used_mib_max: float | None = None
    gpus_never_active: int | None = None
    user_rank: int | None = None
    users_ranked: int | None = None
    user_gpu_h_at_stake: float | None = None
    # the Slurm cluster its commands name (`-M`), where alerts.action_clusters maps its
    # cluster to one: in a lake of several clusters, `scancel 1049` from the wrong host cancels
    # another cluster's job of that id
    slurm_name: str | None = None

    @property
    def fingerprint(self) -> str:
        """What makes a finding 'changed': severity, GPU-hours at stake (0.01 h), end time."""
        gpu_h = "-" if self.gpu_h_at_stake is None else f"{self.gpu_h_at_stake:.2f}"
        end = "-" if self.end_ts is None else self.end_ts.isoformat()
        return f"{self.severity}|{gpu_h}|{end}"

    @property
    def episode_start(self) -> dt.datetime | None:
        """Where the latest episode of an idle detector's finding began (a job idle, busy,
        then idle again is one finding of two runs; its evidence's `episode_start_e`), else
        where the finding's span begins."""
        start = self.evidence.get("episode_start_e")
        if isinstance(start, int | float) and not isinstance(start, bool):
            return dt.datetime.fromtimestamp(start, dt.UTC)
        return self.start_ts

    @property
    def goes_on(self) -> bool:
        """The finding's span reaches the last time the job was observed: no busy bucket came
        after it (its evidence's `observed_end_e`; true where the evidence does not say)."""
        end = self.evidence.get("observed_end_e")
        if self.end_ts is None or not isinstance(end, int | float) or isinstance(end, bool):
            return True
        return self.end_ts.timestamp() >= end - 1e-3

    @property
    def subject_key(self) -> str:
        """The subject a rate limit applies to: `cluster/kind/id`."""
        return f"{self.cluster}/{self.subject_kind}/{self.subject_id}"

    @property
    def is_hardware(self) -> bool:
        """A GPU or node finding (goes to the admins, not a job owner)."""
        return self.subject_kind in HARDWARE_SUBJECTS

    @property
    def job_ended(self) -> bool:
        """The scheduler says the job is over (an end time, or a state other than running)."""
        if self.job_id is None:
            return False
        if self.job_end_ts is not None:
            return True
        return self.job_state is not None and self.job_state not in RUNNING_STATES

    @property
    def forecast(self) -> str | None:
        """What a model's figure counts where it is no GPU-hours held so far, else None: the
        early-waste model's for a job still running reaches to its time limit, and the runtime
        model's is the time limit it likely will not use."""
        if self.detector == RUNTIME_QUANTILES:
            return "of time limit beyond what jobs like it run"
        if not self.detector.startswith(EARLY_WASTE):
            return None
        # as the model computed it (a job that ended since keeps its stored forecast); a
        # finding stored before the evidence said so: by the job's state now
        said = self.evidence.get("forecast")
        forecast = said if isinstance(said, bool) else not self.job_ended
        return "if it runs to its time limit" if forecast else None

    @property
    def job_running(self) -> bool:
        """The job is known and has not ended."""
        if self.job_id is None:
            return False
        if self.job_state is not None:
            return self.job_state in RUNNING_STATES and self.job_end_ts is None
        return self.end_ts is None


def _evidence(raw: Any) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError):
        return {"text": str(raw)}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def from_row(row: dict[str, Any]) -> FindingContext:
    """Build a FindingContext from one row of the query (extra keys are ignored)."""
    names = {f.name for f in fields(FindingContext)}
    values = {k: v for k, v in row.items() if k in names}
    values["evidence"] = _evidence(row.get("evidence"))
    values["nodes"] = tuple(row.get("nodes") or ())
    for key in ("user_rank", "users_ranked", "gpus", "gpus_never_active", "time_limit_s"):
        if values.get(key) is not None:
            values[key] = int(values[key])
    return FindingContext(**values)


def load_findings(
    con: duckdb.DuckDBPyConnection, since: dt.datetime, now: dt.datetime | None = None
) -> list[FindingContext]:
    """Every finding (re)detected since `since` (latest version each), oldest detection first;
    with `now` (the alerter's clock), a cluster whose data end before it counts back from its
    data's end by as much (a model's finding is stamped in the data's time)."""
    from warehouse import queries

    frame = queries.run(con, QUERY, since=since, now=now)
    return [from_row(row) for row in frame.iter_rows(named=True)]


def fingerprint_end(fingerprint: str) -> dt.datetime | None:
    """The finding's end time a notice's `fingerprint` recorded (the data's time when the
    notice was planned), None where it had none or the text is not a fingerprint."""
    end = fingerprint.rsplit("|", 1)[-1]
    try:
        return None if end == "-" else dt.datetime.fromisoformat(end)
    except ValueError:
        return None
