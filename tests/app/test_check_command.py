"""`gpuledger check`: 0 violations on simulated lakes read weeks later, and each kind of edited
row (a finding or a mart row with too many GPU-hours, a finding past the data) named."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import sql
from app.cli import cli
from detectors.findings import read_findings, write_findings
from tests.marts import rows as r
from warehouse.checks import QUERIES
from warehouse.connection import connect
from warehouse.lake import Lake


def gpuledger(*args: str) -> tuple[int, str, str]:
    # a runner that does not see the developer's GPULEDGER_* settings
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _weeks_after_the_data(lake: Path, weeks: int = 3) -> str:
    (end,) = connect(lake).execute("SELECT max(data_end) FROM data_extent").fetchone() or (None,)
    assert isinstance(end, dt.datetime)
    return (end + dt.timedelta(weeks=weeks)).strftime("%Y-%m-%dT%H:%M")


def made_and_read_weeks_later(lake: Path, *sim: str) -> None:
    for args in (
        ("simulate", "--lake", str(lake), "-q", *sim),
        ("attribute", "--lake", str(lake), "-q"),
    ):
        code, _, err = gpuledger(*args)
        assert code == 0, err
    code, _, err = gpuledger(
        "detect", "--lake", str(lake), "-q", "--now", _weeks_after_the_data(lake)
    )
    assert code == 0, err


@pytest.fixture(scope="module")
def clean_lake(tmp_path_factory) -> Path:
    lake = tmp_path_factory.mktemp("check") / "lake"
    made_and_read_weeks_later(lake, "--gpus", "16", "--days", "1", "--seed", "4")
    return lake


@pytest.fixture
def lake(clean_lake: Path, tmp_path: Path) -> Path:
    """A copy of the clean lake to edit."""
    copy = tmp_path / "lake"
    shutil.copytree(clean_lake, copy)
    return copy


def test_every_check_file_runs(clean_lake):
    assert sorted(QUERIES) == [n for n in sql.names() if n.startswith("check/")]


def test_a_clean_lake_gives_one_line_and_exit_0(clean_lake):
    code, out, err = gpuledger("check", "--lake", str(clean_lake))

    assert (code, err) == (0, "")
    assert out.startswith("0 violations: 8 checks over 1 cluster(s), ")
    assert out.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "sim",
    [
        ("--days", "1", "--seed", "3", "--gpus", "64"),
        ("--days", "7", "--seed", "9", "--gpus", "16"),
    ],
    ids=["64gpus-1day-seed3", "16gpus-7days-seed9"],
)
def test_simulated_lakes_read_weeks_later_have_no_violation(tmp_path, sim):
    made_and_read_weeks_later(tmp_path / "lake", *sim)

    code, out, _ = gpuledger("check", "--lake", str(tmp_path / "lake"))

    assert code == 0, out
    assert out.startswith("0 violations")


def test_a_mig_gpu_with_a_free_busy_instance_has_no_violation(tmp_path):
    # two 3g.40gb instances of GPU 0 reporting together for an hour, both busy: job 100 holds
    # instance 1 over [0, 3000), instance 2 is nobody's. A MIG instance is one of its job's GPUs
    # in job_usage and its share of the physical GPU in the occupancy marts and the GPU's own
    # figures: the GPU worked 0.58 h with no job (0.5 × 600 s + 0.5 × 3600 s), not 1.17 h.
    lake = tmp_path / "lake"
    mig = {"mig_profile": "3g.40gb", "engine_active": 0.5, "power_w": 300.0}
    r.build_lake(
        lake,
        samples=r.samples(range(0, 3600, 30), mig_instance=1, **mig)
        + r.samples(range(0, 3600, 30), mig_instance=2, **mig),
        jobs=[r.job("100", 0, 3000)],
        job_gpus=[r.job_gpu("100", 0, 3000, mig_instance=1)],
        gpus=[r.gpu() | {"mig_profile": "3g.40gb"}],
    ).close()
    code, _, err = gpuledger("detect", "--lake", str(lake), "-q")
    assert code == 0, err
    [finding] = [
        f for f in read_findings(Lake.at(lake)).to_pylist() if f["detector"] == "gpu_without_job"
    ]
    assert finding["gpu_h_at_stake"] == pytest.approx((600 + 3600) * 0.5 / 3600)

    code, out, _ = gpuledger("check", "--lake", str(lake))

    assert code == 0, out
    assert out.startswith("0 violations")


def test_a_lake_the_service_builds_from_exporter_labels_has_no_violation(tmp_path):
    # a job known from its exporter's labels alone (job_gpus, no scheduler record: "an unknown
    # job's 0 GPU(s) × 0.00 h"), and an hourly health finding in the data's last, partial hour
    # (its span ran to the hour's end, after the data): both failed `check` on a lake the
    # service had built itself
    lake = tmp_path / "lake"
    times = range(0, 6300, 30)
    r.build_lake(
        lake,
        samples=r.samples(times, engine_active=0.5, remap_pending=[t >= 3600 for t in times]),
        job_gpus=[r.job_gpu("x", 0, 6300)],
        gpus=[r.gpu()],
    ).close()
    code, _, err = gpuledger("detect", "--lake", str(lake), "-q")
    assert code == 0, err
    [pending] = [
        f for f in read_findings(Lake.at(lake)).to_pylist() if f["detector"] == "row_remap_pending"
    ]
    assert pending["end_ts"] == r.at(6300)  # the end of the last sample's interval

    code, out, _ = gpuledger("check", "--lake", str(lake))

    assert code == 0, out
    assert out.startswith("0 violations")


def _edit_finding(lake: Path, kind: str, **changes: object) -> str:
    """Rewrite the first finding about a `kind` subject with `changes`; return its id."""
    findings = read_findings(Lake.at(lake), "sim")
    index = pc.index(findings.column("subject_kind"), kind).as_py()
    assert index >= 0, kind
    rows = findings.to_pylist()
    rows[index] |= changes
    write_findings(Lake.at(lake), pa.Table.from_pylist(rows, findings.schema))
    return str(rows[index]["finding_id"])


def test_a_job_finding_with_too_many_gpu_hours_is_named(lake):
    finding = _edit_finding(lake, "job", gpu_h_at_stake=10_000.0)

    code, out, err = gpuledger("check", "--lake", str(lake))

    assert code == 1
    [line] = out.splitlines()
    assert line.startswith(f"job_gpu_hours [sim] finding {finding} (")
    assert "GPU-hours at stake 10000.00 exceeds the job's" in line
    assert err.startswith("1 violation(s): ")


def test_a_user_finding_with_more_than_its_allocation_is_named(lake):
    finding = _edit_finding(lake, "user", gpu_h_at_stake=1e6)

    code, out, _ = gpuledger("check", "--lake", str(lake))

    assert code == 1
    [line] = out.splitlines()
    assert line.startswith(f"owner_gpu_hours [sim] finding {finding} (low_efficiency_user): ")


def test_a_finding_ending_after_the_data_is_named(lake):
    finding = _edit_finding(lake, "job", end_ts=dt.datetime(2031, 1, 1, tzinfo=dt.UTC))

    code, out, _ = gpuledger("check", "--lake", str(lake))

    assert code == 1
    [line] = out.splitlines()
    assert line.startswith(f"findings_in_data [sim] finding {finding} (")
    assert "2031-01-01 00:00:00 ends after the data" in line


def test_a_job_usage_row_with_too_many_gpu_hours_is_named(lake):
    path = lake / "job_usage" / "cluster=sim" / "mart.parquet"
    usage = pq.read_table(path)
    job = usage.column("job_id")[0].as_py()
    alloc = usage.column("alloc_gpu_h").to_pylist()
    alloc[0] = 10_000.0
    pq.write_table(
        usage.set_column(
            usage.schema.get_field_index("alloc_gpu_h"), "alloc_gpu_h", pa.array(alloc)
        ),
        path,
    )

    code, out, _ = gpuledger("check", "--lake", str(lake))

    assert code == 1
    lines = out.splitlines()
    assert f"job_gpu_hours [sim] job_usage row of job {job}: alloc_gpu_h 10000.00 exceeds" in out
    # the marts no longer add up either: usage_daily's total differs from job_usage's
    assert any(
        line.startswith("mart_totals [sim] usage_daily totals: alloc GPU-h") for line in lines
    )


def test_occupancy_buckets_that_state_another_fleet_or_leave_a_hole_are_named(lake):
    # every bucket doubled to 32 GPUs in service on the 16-GPU fleet (unallocated to match),
    # and an hour of buckets gone: `check` passed both
    [path] = sorted((lake / "cluster_occupancy").rglob("*.parquet"))[:1]
    table = pq.read_table(path).sort_by("bucket")
    rows = table.to_pylist()
    for row in rows:
        row["gpus_total"] += 16.0
        row["gpus_unallocated"] += 16.0
    gone = rows[24:36]
    kept = rows[:24] + rows[36:]
    pq.write_table(pa.Table.from_pylist(kept, schema=table.schema), path)

    code, out, _ = gpuledger("check", "--lake", str(lake))

    assert code == 1
    assert "32.0000 GPUs in service, where the fleet has 16" in out
    first_gone = gone[0]["bucket"].astimezone(dt.UTC)
    after = (gone[-1]["bucket"] + (gone[1]["bucket"] - gone[0]["bucket"])).astimezone(dt.UTC)
    assert f"cluster_occupancy bucket {after:%Y-%m-%d %H:%M}: no bucket in the" in out
    assert first_gone < after


def test_marts_the_engine_cannot_audit_are_exit_2_not_a_traceback(lake, monkeypatch):
    import duckdb

    import warehouse.checks

    def other_version(con):
        raise duckdb.BinderException('Referenced column "gpus_total" not found in FROM clause!')

    monkeypatch.setattr(warehouse.checks, "run_checks", other_version)
    code, out, err = gpuledger("check", "--lake", str(lake))

    assert code == 2
    assert out == ""
    assert err.startswith('Error: the marts cannot be audited (Referenced column "gpus_total"')
    assert err.count("\n") == 1


def test_a_lake_without_marts_is_one_error_line_and_exit_2_not_a_violations_1(tmp_path):
    code, out, err = gpuledger("check", "--lake", str(tmp_path / "none"))

    assert code == 2
    assert out == ""
    assert err.startswith("Error: The lake at ") and err.count("\n") == 1


def test_a_job_observed_longer_than_it_held_its_gpu_is_named(tmp_path):
    # The probe: e1 ran 1 h, its allocation row ends 9999-12-31 (another tool's "unknown"); the
    # allocated hours stop with the job, but its GPU's samples kept their owner: e1 was
    # "observed" 9 h more than it held, and check passed
    far = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)
    r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 10 * 3600, 600), interval_s=600.0),
        jobs=[r.job("e1", 0, 3600)],
        job_gpus=[r.job_gpu("e1", 0, 3600) | {"end_ts": far}],
        gpus=[r.gpu()],
    )

    code, out, _ = gpuledger("check", "--lake", str(tmp_path))

    assert code == 1
    assert (
        "observed_within_held [della] job e1: observed 10.00 GPU-hours, more than the 1.00" in out
    )
