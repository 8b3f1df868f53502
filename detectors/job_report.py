"""Everything `gpuledger job` shows about one job, gathered from the lake in one place.

Allocation and usage (sql/jobs/job_detail), per-GPU activity and its time series, the
bottleneck diagnosis, the job's findings (when `gpuledger detect` has written any) and the
change to make next time. Rendering is the app's business; this returns plain data.

`load_job_advice` gathers the same inputs without the time series, and `load_job_diagnosis`
the bottleneck alone: the dashboard's Job page calls them, so the page and `gpuledger job` give
the same advice and diagnosis for the same job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from detectors.bottleneck import diagnose_rows
from detectors.job_advice import Advice, advise, job_started
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "AmbiguousJob",
    "JobReport",
    "UnknownJob",
    "load_job_advice",
    "load_job_diagnosis",
    "load_job_report",
]


class UnknownJob(LookupError):
    """No job with this id (on this cluster) is in the lake. `components`: where the id is
    a heterogeneous job's, the ids of its components the lake holds (each a job of its own)."""

    def __init__(self, message: str, components: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.components = components


class AmbiguousJob(LookupError):
    """Several clusters have a job with this id; --cluster must choose."""


@dataclass(frozen=True, slots=True)
class JobReport:
    """One job: its record and usage, its GPUs (each with a busy series), diagnosis, findings."""

    job: dict[str, Any]
    gpus: list[dict[str, Any]]
    diagnosis: dict[str, Any]
    findings: list[dict[str, Any]]
    advice: list[Advice] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data: `gpuledger job --format json` and the HTTP API's body."""
        return {
            "job": self.job,
            "gpus": self.gpus,
            "diagnosis": self.diagnosis,
            "findings": self.findings,
            "next_time": [
                {
                    "headline": a.headline,
                    "option": a.option,
                    "kubernetes": a.kubernetes,
                    "reason": a.reason,
                }
                for a in self.advice
            ],
        }


def _load_job(con: duckdb.DuckDBPyConnection, job_id: str, cluster: str | None) -> dict[str, Any]:
    rows = queries.rows(con, "jobs/job_detail", job_id=job_id, cluster=cluster)
    if not rows:
        where = f" on cluster {cluster!r}" if cluster else ""
        parts = queries.rows(con, "jobs/het_components", job_id=job_id, cluster=cluster)
        components = tuple(dict.fromkeys(row["job_id"] for row in parts))
        if components:  # Slurm names a heterogeneous job by its number; sacct, its components
            raise UnknownJob(
                f"No job {job_id!r}{where} in the lake: it is a heterogeneous job, whose "
                f"components are {', '.join(components)} (gpuledger job {components[0]})",
                components,
            )
        raise UnknownJob(f"No job {job_id!r}{where} in the lake")
    if len(rows) > 1:
        clusters = ", ".join(row["cluster"] for row in rows)
        raise AmbiguousJob(f"Job {job_id!r} exists on several clusters ({clusters}); use --cluster")
    return rows[0]


NOT_STARTED = {
    "diagnosis": "not_started",
    "advice": "The job never started: nothing ran, so there is nothing to diagnose.",
}


def _diagnosis(con: duckdb.DuckDBPyConnection, job: Mapping[str, Any]) -> dict[str, Any]:
    """The job's bottleneck: its signals, `diagnosis` and `advice` (detectors.bottleneck); a
    job that never started has none to find (its JSON, the API's, said `unobserved` and
    advised checking the GPU-to-job mapping)."""
    if not job_started(job):
        return {"cluster": job["cluster"], "job_id": job["job_id"], **NOT_STARTED}
    diagnosed = [
        row
        for row in diagnose_rows(con, [job["job_id"]])
        if row["cluster"] in (job["cluster"], None)
    ]
    return diagnosed[0] if diagnosed else {"diagnosis": "unobserved"}


def _advice_inputs(
    con: duckdb.DuckDBPyConnection, job: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """The job's per-GPU activity, its diagnosis and its findings (what `advise` reads)."""
    params = {"cluster": job["cluster"], "job_id": job["job_id"]}
    gpus = queries.rows(con, "jobs/job_gpu_activity", **params)
    diagnosis = _diagnosis(con, job)
    findings = queries.rows(con, "jobs/job_findings", **params)
    return gpus, diagnosis, findings


def load_job_advice(
    con: duckdb.DuckDBPyConnection, job_id: str, cluster: str | None = None
) -> list[Advice]:
    """What to change next time for `job_id`: the advice of `load_job_report`, alone."""
    job = _load_job(con, job_id, cluster)
    gpus, diagnosis, findings = _advice_inputs(con, job)
    return advise(job, gpus, diagnosis.get("diagnosis"), findings)


def load_job_diagnosis(
    con: duckdb.DuckDBPyConnection, job_id: str, cluster: str | None = None
) -> dict[str, Any]:
    """The bottleneck diagnosis of `job_id`: the `diagnosis` of `load_job_report`, alone."""
    return _diagnosis(con, _load_job(con, job_id, cluster))


def load_job_report(
    con: duckdb.DuckDBPyConnection,
    job_id: str,
    cluster: str | None = None,
    *,
    final: Mapping[str, Any] | None = None,
) -> JobReport:
    """The report of `job_id` (on `cluster`, needed only when several clusters have the id).

    `final`: what the scheduler said of the job at its end that the lake may not hold yet
    (`state`, `runtime_s`: the job-end mail's subject, while the lake still holds the job as
    running); the report shows it and its advice follows it (a TIMEOUT is told to ask for more
    time, not that nothing is to change). Where its run time differs from the lake's, the
    lake's is kept as `usage_runtime_s`: the part of the run the usage figures cover."""
    held = _load_job(con, job_id, cluster)
    job = held | dict(final or {})
    if job.get("runtime_s") != held.get("runtime_s"):
        # Slurm's final run time beside usage the lake holds of part of it (a job the lake
        # still holds as running): CPU efficiency is of the run time the figures cover (a
        # job's 63 % read 25 % at 20 h of which 8 were collected, and it was told to ask
        # for fewer cores), and the report says which part that is
        job["usage_runtime_s"] = held.get("runtime_s")
    gpus, diagnosis, findings = _advice_inputs(con, job)
    series = {
        (row["device"], row["mig_instance"]): row
        for row in queries.rows(con, "jobs/job_gpu_series", cluster=job["cluster"], job_id=job_id)
    }
    for gpu in gpus:  # each GPU's buckets in time order
        mine = series.get((gpu["device"], gpu["mig_instance"]), {})
        gpu["busy_series"] = mine.get("busy_series", [])
        gpu["series_start"] = mine.get("series_start")
    return JobReport(
        job=job,
        gpus=gpus,
        diagnosis=diagnosis,
        findings=findings,
        advice=advise(job, gpus, diagnosis.get("diagnosis"), findings),
    )
