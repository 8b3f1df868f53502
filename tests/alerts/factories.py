"""Hand-made findings, jobs and usage rows for the alert tests, landed with the real writer."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa

from app.alerts.settings import AlertsConfig
from app.config import load_config
from warehouse import writer
from warehouse.schema import TABLES

# A Wednesday, 10:00 UTC: a workday, outside the default quiet hours (20:00-08:00)
NOW = dt.datetime(2026, 11, 4, 10, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def land(lake: Path, table: str, rows: list[dict[str, Any]], batch: str = "b1") -> None:
    """Land `rows` (only the columns they name; the rest null) into `table`."""
    full = TABLES[table].schema
    names = [f.name for f in full if any(f.name in r for r in rows)]
    schema = pa.schema([full.field(n) for n in names])
    writer.write_batch(lake, table, pa.Table.from_pylist(rows, schema=schema), batch)


def finding(**over: Any) -> dict[str, Any]:
    row = {
        "cluster": "della",
        "finding_id": "f-idle",
        "detector": "idle_job",
        "severity": "warn",
        "subject_kind": "job",
        "subject_id": "4242",
        "job_id": "4242",
        "user": "alice",
        "account": "physics",
        "start_ts": NOW - 130 * MIN,
        "end_ts": None,
        "detected_ts": NOW - 5 * MIN,
        "gpu_h_at_stake": 8.67,
        "message": "4 GPUs idle for 2 h 10 min",
        "evidence": '{"idle_minutes": 130}',
    }
    row.update(over)
    return row


def job(**over: Any) -> dict[str, Any]:
    row = {
        "cluster": "della",
        "job_id": "4242",
        "user": "alice",
        "account": "physics",
        "partition": "gpu",
        "job_name": "train-llm",
        "state": "RUNNING",
        "start_ts": NOW - 130 * MIN,
        "end_ts": None,
        "gpus": 4,
        "nodes": ["g001"],
        "interactive": False,
        "source": "test",
        "updated_ts": NOW - 10 * MIN,
    }
    row.update(over)
    return row


def usage(**over: Any) -> dict[str, Any]:
    row = {
        "cluster": "della",
        "job_id": "4242",
        "gpus": 4,
        "busy_mean": 0.002,
        "gpu_util_pct_mean": 0.0,
        "sm_active_mean": 0.001,
        "fb_used_mib_max": 512.0,
        "gpus_never_active": 4,
    }
    row.update(over)
    return row


def standard_lake(lake: Path) -> None:
    """Three findings that must be sent and one below the severity floor.

    - f-idle: alice's running job 4242, idle 130 min → final notice (60/105/120 min);
    - f-over: bob's ended job 4300 held 8 GPUs and used 2 → a notice with --gres=gpu:2;
    - f-xid: a failing GPU on g007 (critical, no user) → the admins;
    - f-info: info severity, below min_severity=warn → nothing.
    """
    land(
        lake,
        "findings",
        [
            finding(),
            finding(
                finding_id="f-over",
                detector="overallocated",
                subject_id="4300",
                job_id="4300",
                user="bob",
                start_ts=NOW - 600 * MIN,
                end_ts=NOW - 120 * MIN,
                gpu_h_at_stake=20.0,
                message="8 GPUs allocated, 2 used",
                evidence='{"gpus_used": 2}',
            ),
            finding(
                finding_id="f-xid",
                detector="xid_errors",
                severity="critical",
                subject_kind="gpu",
                subject_id="GPU-abc",
                job_id=None,
                user=None,
                account=None,
                node="g007",
                gpu_uuid="GPU-abc",
                gpu_h_at_stake=None,
                message="XID 79 (GPU fell off the bus) on GPU 3 of g007",
                evidence=None,
            ),
            finding(finding_id="f-info", severity="info", subject_id="4444", job_id="4444"),
        ],
    )
    land(
        lake,
        "jobs",
        [
            job(),
            job(
                job_id="4300",
                user="bob",
                job_name="finetune",
                state="COMPLETED",
                start_ts=NOW - 600 * MIN,
                end_ts=NOW - 120 * MIN,
                gpus=8,
                nodes=["g002"],
            ),
        ],
    )
    land(lake, "job_usage", [usage(), usage(job_id="4300", gpus=8, gpus_never_active=6)])


DIRECTORY_TOML = """
[users.alice]
email = "alice@physics.example.org"
slack_id = "U0ALICE"
name = "Alice"

[users.carol]
slack_id = "U0CAROL"

[accounts.physics]
managers = ["carol", "pi@example.org"]
"""


def alerts_config(tmp_path: Path, env: dict[str, str] | None = None) -> AlertsConfig:
    """The [alerts] section through the real loader, with a directory file and test servers."""
    directory = tmp_path / "directory.toml"
    directory.write_text(DIRECTORY_TOML, encoding="utf-8")
    base = {
        "GPULEDGER_ALERTS_DIRECTORY": str(directory),
        "GPULEDGER_ALERTS_EMAIL_DOMAIN": "example.org",
        "GPULEDGER_ALERTS_EMAIL_FROM": "gpuledger@example.org",
        "GPULEDGER_ALERTS_ADMIN_EMAILS": "admin@example.org",
        "GPULEDGER_ALERTS_SMTP_HOST": "127.0.0.1",
        "GPULEDGER_ALERTS_SMTP_TIMEOUT_S": "5",
        "GPULEDGER_ALERTS_RETRY_BASE_S": "0.5",
    }
    base.update(env or {})
    return load_config(None, environ=base).section(AlertsConfig)
