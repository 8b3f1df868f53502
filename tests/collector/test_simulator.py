"""The simulator: deterministic and idempotent, its ground truth holds in the marts, its
allocations are consistent, and its default fleet looks like a real LLM cluster (DESIGN §4.2)."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import pytest
from polars.testing import assert_frame_equal

from collector.errors import ConfigError
from collector.sim import SimConfig, SimResult, simulate
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect, quote_ident
from warehouse.lake import Lake
from warehouse.schema import MARTS, TABLES

SMALL = SimConfig(gpus=32, days=2)
# Big enough for 16-GPU pre-training jobs, hung jobs and a failing GPU. Hung jobs are rare; the
# seed is one whose lake has some on nodes with profiling fields (seed 42 puts both of its hung
# jobs on the one node without them), so the SM-activity check below has something to look at.
TRUTH = SimConfig(gpus=64, days=3, seed=3)
INTERVAL_H = TRUTH.interval_s / 3600


def _rows(con: duckdb.DuckDBPyConnection, query: str, **params: Any) -> list[dict[str, Any]]:
    rel = con.sql(query, params=params or None)
    return [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]


def _one(con: duckdb.DuckDBPyConnection, query: str, **params: Any) -> dict[str, Any]:
    [row] = _rows(con, query, **params)
    return row


def _reading(root: Path) -> closing[duckdb.DuckDBPyConnection]:
    """One connection over the lake as it is now, for all a test reads of it (each costs a
    third of a second), closed when the `with` ends."""
    return closing(connect(root))


def _snapshot(root: Path, con: duckdb.DuckDBPyConnection | None = None) -> dict[str, Any]:
    """The lake's files, and every table's rows: marts as sorted frames, the rest as hashes
    (read through `con`, a connection over `root` as it is now; by default a new one).

    Marts hold sums of floats that DuckDB adds in parallel, in no fixed order, so a rebuild may
    differ in the last bit; they are compared with a tolerance (`_assert_same_lake`).
    """
    if con is None:
        with _reading(root) as new:
            return _snapshot(root, new)
    hashes = {
        name: con.sql(
            f"SELECT count(*), coalesce(sum(hash(t)), 0) FROM {quote_ident(name)} AS t"
        ).fetchall()[0]
        for name in sorted(set(TABLES) - set(MARTS))
    }
    marts = {}
    for name in sorted(MARTS):
        frame = con.sql(f"SELECT * FROM {quote_ident(name)}").pl()
        keys = [c for c, t in frame.schema.items() if not t.is_float()]
        marts[name] = frame.sort(keys)
    files = sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_state" not in p.parts
    )
    return {"files": files, "hashes": hashes, "marts": marts}


def _assert_same_lake(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert left["files"] == right["files"]
    assert left["hashes"] == right["hashes"]
    assert left["marts"].keys() == right["marts"].keys()
    for name, frame in left["marts"].items():
        try:
            assert_frame_equal(frame, right["marts"][name], rel_tol=1e-9, abs_tol=1e-9)
        except AssertionError as exc:
            raise AssertionError(f"mart {name} differs: {exc}") from exc


def _small_tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the scheduler and truth tables, in a stable order."""
    return {
        "jobs": con.sql("SELECT * FROM jobs ORDER BY job_id").fetchall(),
        "job_gpus": con.sql("SELECT * FROM job_gpus ORDER BY job_id, gpu_uuid").fetchall(),
        "sim_truth": con.sql(
            "SELECT * FROM sim_truth ORDER BY subject_kind, subject_id, label, start_ts"
        ).fetchall(),
    }


def _samples_checksum(con: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    [row] = con.sql(
        """
        SELECT count(*), sum(hash(s)), sum(gpu_util_pct), sum(energy_j),
               count(job_id), min(ts), max(ts)
        FROM gpu_samples AS s
        """
    ).fetchall()
    return tuple(row)


def _attribute(root: Path) -> tuple[int, int]:
    """Bring the marts up to date; return the days built and the days whose tail was."""
    con = connect(root, require=("gpu_samples",))
    try:
        result = attribute(con, root, AttributionConfig())
    finally:
        con.close()
    return len(result.days.rebuilt), len(result.days.tails)


# ---------------------------------------------------------------- determinism and idempotence


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, SimResult]:
    """Two lakes simulated with the same seed and one with another seed (read only: a test
    that writes copies one), and what simulating the first said."""
    base = tmp_path_factory.mktemp("twins")
    a, b, other = base / "a", base / "b", base / "other"
    made = simulate(SMALL, Lake.at(a))
    simulate(SMALL, Lake.at(b))
    simulate(SimConfig(gpus=SMALL.gpus, days=SMALL.days, seed=SMALL.seed + 1), Lake.at(other))
    return a, b, other, made


@pytest.fixture(scope="module")
def twin_lakes(twins: tuple[Path, Path, Path, SimResult]) -> tuple[Path, Path, Path]:
    return twins[:3]


class Read(NamedTuple):
    """What the tests compare of a lake: its scheduler and truth rows, its samples' checksum,
    and its files and every table's rows (`_snapshot`)."""

    tables: dict[str, list[tuple[Any, ...]]]
    checksum: tuple[Any, ...]
    snapshot: dict[str, Any]


@pytest.fixture(scope="module")
def first_twin(twins: tuple[Path, Path, Path, SimResult]) -> Read:
    """The first twin, read once (one connection) for the three tests that compare with it."""
    with _reading(twins[0]) as con:
        return Read(_small_tables(con), _samples_checksum(con), _snapshot(twins[0], con))


def test_the_same_seed_lands_the_same_rows(
    twin_lakes: tuple[Path, Path, Path], first_twin: Read
) -> None:
    _, b, _ = twin_lakes
    with _reading(b) as con_b:
        tables_a = first_twin.tables
        assert all(tables_a.values()), "the simulator landed an empty scheduler or truth table"
        assert tables_a == _small_tables(con_b)
        assert first_twin.checksum == _samples_checksum(con_b)
        _assert_same_lake(first_twin.snapshot, _snapshot(b, con_b))


def test_a_job_that_never_started_used_no_memory(twin_lakes: tuple[Path, Path, Path]) -> None:
    """`gpuledger job` showed a PENDING job's "CPU memory [68%]": the simulator gave every job a
    MaxRSS, started or not."""
    with _reading(twin_lakes[0]) as con:
        got = _one(
            con,
            "SELECT count(*) FILTER (WHERE start_ts IS NULL) AS unstarted, "
            "count(*) FILTER (WHERE start_ts IS NULL AND max_rss_mib IS NOT NULL) AS with_rss, "
            "count(*) FILTER (WHERE start_ts IS NOT NULL AND max_rss_mib IS NULL) AS without "
            "FROM jobs_latest",
        )
    assert got["unstarted"] > 0
    assert got["with_rss"] == 0 and got["without"] == 0


def test_another_seed_lands_other_rows(
    twin_lakes: tuple[Path, Path, Path], first_twin: Read
) -> None:
    _, _, other = twin_lakes
    with _reading(other) as con_other:
        assert first_twin.tables["jobs"] != _small_tables(con_other)["jobs"]
        assert first_twin.checksum != _samples_checksum(con_other)


def test_simulating_again_into_the_same_lake_changes_nothing(
    twins: tuple[Path, Path, Path, SimResult], first_twin: Read, tmp_path: Path
) -> None:
    # a copy of the first twin: a lake `SMALL` was simulated into, and what that said
    lake = tmp_path / "lake"
    shutil.copytree(twins[0], lake)
    first = twins[3]
    before = first_twin.snapshot  # the copy's files and rows are the first twin's
    again = simulate(SMALL, Lake.at(lake))
    assert again == first
    _assert_same_lake(_snapshot(lake), before)


def test_other_options_into_a_simulated_cluster_are_refused_before_anything_lands(
    tmp_path: Path,
) -> None:
    # a demo of 3 days, then of 2 into the same lake: the first run's third day stayed beside
    # the second's two (`check`: 14 violations), or one day's fleet beside another's
    one_day = SimConfig(gpus=8, days=1, seed=3)
    simulate(one_day, Lake.at(tmp_path))
    files = sorted(tmp_path.rglob("*.parquet"))

    with pytest.raises(ConfigError, match=r"simulated with other options \(--days 1 → 2\)"):
        simulate(SimConfig(gpus=8, days=2, seed=3), Lake.at(tmp_path))
    with pytest.raises(ConfigError, match=r"--gpus 8 → 16, --seed 3 → 4"):
        simulate(SimConfig(gpus=16, days=1, seed=4), Lake.at(tmp_path))
    assert sorted(tmp_path.rglob("*.parquet")) == files
    simulate(one_day, Lake.at(tmp_path))  # the same options: the same lake
    simulate(SimConfig(cluster="other", gpus=8, days=2, seed=3), Lake.at(tmp_path))


def test_two_simulations_into_one_lake_check_and_record_their_options_in_turn(
    tmp_path: Path,
) -> None:
    # Two runs at once with other options both passed the check (2 of 20 tries): a lake of
    # one run's days beside the other's, recorded as the second's. The check and the record are
    # one turn, under the lock: a run that waits for it sees what the other recorded.
    import json
    import threading

    from collector.sim.runner import SIMULATED_FILE
    from warehouse import layout

    record = tmp_path / "_state" / SIMULATED_FILE
    raised: list[BaseException] = []

    def run() -> None:
        try:
            simulate(SimConfig(gpus=2, days=1, seed=5, interval_s=3600), Lake.at(tmp_path))
        except ConfigError as exc:
            raised.append(exc)

    with layout.table_lock(tmp_path, SIMULATED_FILE):  # another run's turn
        waiting = threading.Thread(target=run)
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive() and not record.exists()  # it waits its turn
        layout.ensure_dir(record.parent)
        record.write_text(json.dumps({"sim": {"gpus": 2, "days": 1, "seed": 6}}))
    waiting.join(timeout=60)
    assert [str(e) for e in raised] and "simulated with other options" in str(raised[0])
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_cluster_holding_an_imported_trace_is_refused_before_anything_lands(
    tmp_path: Path,
) -> None:
    # simulated into the cluster of an imported Philly trace, 30 simulated jobs mixed into the
    # trace's 86 (a replay then said "116 GPU jobs submitted 2017-09-20 … 2026-11-02")
    from click.testing import CliRunner

    from app.cli import cli
    from collector.sim.runner import simulate_records
    from collector.sources.philly.trace import import_philly

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "philly"
    lake = tmp_path / "lake"
    import_philly(fixture, "philly", Lake.at(lake))
    files = {p: p.stat().st_mtime_ns for p in lake.rglob("*.parquet")}
    state = sorted(p.name for p in (lake / "_state").iterdir())

    args = ["simulate", "--lake", str(lake), "--cluster", "philly", "--gpus", "8", "--days", "1"]
    result = CliRunner().invoke(cli, [*args, "-q"])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    assert "cluster 'philly' already holds jobs that were not simulated" in errors[0]
    with pytest.raises(ConfigError, match="already holds jobs that were not simulated"):
        simulate_records(SimConfig(cluster="philly", gpus=8, days=1), Lake.at(lake))
    assert {p: p.stat().st_mtime_ns for p in lake.rglob("*.parquet")} == files
    assert sorted(p.name for p in (lake / "_state").iterdir()) == state  # no options recorded
    # a cluster of its own simulates
    simulate(SimConfig(cluster="sim", gpus=8, days=1, interval_s=3600), Lake.at(lake))


@pytest.mark.slow
def test_attributing_again_changes_nothing(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    simulate(SMALL, Lake.at(lake))
    # the first pass builds every day; a second, with nothing changed, builds none
    assert _attribute(lake)[0] > 0
    built = _snapshot(lake)
    assert built["marts"]["job_usage"].height > 0
    assert _attribute(lake) == (0, 0)
    _assert_same_lake(_snapshot(lake), built)
    # re-landing the same window after attribution, then attributing, still changes nothing
    simulate(SMALL, Lake.at(lake))
    _attribute(lake)
    _assert_same_lake(_snapshot(lake), built)


# ---------------------------------------------------------------- ground truth in the marts


@pytest.fixture(scope="module")
def truth_con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection over a simulated and attributed 64-GPU, 3-day lake."""
    lake = tmp_path_factory.mktemp("truth") / "lake"
    simulate(TRUTH, Lake.at(lake))
    con = connect(lake, require=("gpu_samples",))
    attribute(con, lake, AttributionConfig())  # refreshes `con`'s views of the marts
    assert con.sql("SELECT count(*) FROM job_usage").fetchall() != [(0,)]
    yield con
    con.close()


def _jobs_labelled(
    con: duckdb.DuckDBPyConnection, label: str, where: str = "TRUE"
) -> list[dict[str, Any]]:
    return _rows(
        con,
        f"""
        SELECT u.*
        FROM job_usage AS u
        WHERE u.job_id IN (
            SELECT subject_id FROM sim_truth WHERE subject_kind = 'job' AND label = $label
        )
        AND {where}
        ORDER BY u.job_id
        """,
        label=label,
    )


def test_jobs_labelled_idle_are_idle_for_all_they_held(
    truth_con: duckdb.DuckDBPyConnection,
) -> None:
    # Time an exporter was down is unobserved, not idle (DESIGN §4): leave those jobs out.
    jobs = _jobs_labelled(
        truth_con,
        "idle",
        """u.end_ts IS NOT NULL AND u.job_id NOT IN (
            SELECT g.job_id
            FROM job_gpus AS g
            JOIN sim_truth AS t
                ON t.subject_kind = 'node' AND t.label = 'telemetry_gap' AND t.subject_id = g.node
                AND t.start_ts < coalesce(g.end_ts, 'infinity'::TIMESTAMPTZ)
                AND t.end_ts > g.start_ts
        )""",
    )
    assert jobs, "no finished idle job to check"
    for job in jobs:
        tolerance = 0.02 * job["alloc_gpu_h"] + job["gpus"] * INTERVAL_H
        assert job["active_gpu_h"] == pytest.approx(0.0, abs=1e-9), job
        assert abs(job["alloc_gpu_h"] - job["idle_gpu_h"]) <= tolerance, job


def test_pretraining_jobs_keep_their_gpus_busy(truth_con: duckdb.DuckDBPyConnection) -> None:
    # Jobs that ran under an hour are mostly start-up (data loading, model build): left out.
    jobs = _jobs_labelled(truth_con, "workload:pretrain", "u.alloc_gpu_h >= u.gpus")
    assert jobs, "no pre-training job ran an hour in the window"
    for job in jobs:
        assert job["busy_mean"] >= 0.5, job


def test_partially_idle_jobs_leave_gpus_never_active(truth_con: duckdb.DuckDBPyConnection) -> None:
    jobs = _jobs_labelled(truth_con, "partial_idle")
    assert jobs, "no partially idle job"
    for job in jobs:
        assert job["gpus_never_active"] >= 1, job
        if job["observed_gpu_h"] >= 0.1 * job["gpus"]:  # long enough for its workers to show
            assert job["gpus_never_active"] < job["gpus"], job


def test_hung_jobs_look_busy_to_gpu_util_but_not_to_sm_activity(
    truth_con: duckdb.DuckDBPyConnection,
) -> None:
    spans = _rows(
        truth_con,
        """
        SELECT
            t.subject_id AS job_id,
            count(*) AS samples,
            median(s.gpu_util_pct) AS util_median,
            count(s.sm_active) AS sm_samples,
            max(s.sm_active) AS sm_max,
            max(s.engine_active) AS engine_max
        FROM sim_truth AS t
        JOIN gpu_samples AS s
            ON s.job_id = t.subject_id AND s.ts >= t.start_ts AND s.ts < t.end_ts
        WHERE t.subject_kind = 'job' AND t.label = 'hung'
        GROUP BY t.subject_id
        ORDER BY t.subject_id
        """,
    )
    assert spans, "no hung job with samples in its hung span"
    for span in spans:
        assert span["util_median"] >= 90, span
    profiled = [s for s in spans if s["sm_samples"]]
    assert profiled, "every hung job ran on a node without profiling fields"
    for span in profiled:
        assert span["sm_max"] < 0.05, span
        assert span["engine_max"] < 0.05, span


# ---------------------------------------------------------------- allocations and ownership


def test_no_gpu_is_allocated_to_two_jobs_at_once(truth_con: duckdb.DuckDBPyConnection) -> None:
    row = _one(
        truth_con,
        """
        SELECT
            count(*) AS intervals,
            count(*) FILTER (WHERE end_ts IS NOT NULL AND end_ts <= start_ts) AS empty,
            count(*) FILTER (
                WHERE next_start IS NOT NULL AND (end_ts IS NULL OR next_start < end_ts)
            ) AS overlapping
        FROM (
            SELECT
                start_ts,
                end_ts,
                lead(start_ts) OVER (
                    PARTITION BY cluster, gpu_uuid ORDER BY start_ts, job_id
                ) AS next_start
            FROM job_gpus
        )
        """,
    )
    assert row["intervals"] > 0
    assert row["empty"] == 0
    assert row["overlapping"] == 0


def test_every_sample_belongs_to_the_allocation_that_contains_it(
    truth_con: duckdb.DuckDBPyConnection,
) -> None:
    lo = TRUTH.start + dt.timedelta(days=1)
    row = _one(
        truth_con,
        """
        WITH day AS (
            SELECT cluster, gpu_uuid, ts, job_id
            FROM gpu_samples
            WHERE ts >= $lo AND ts < $hi
        ),
        matched AS (
            SELECT d.gpu_uuid, d.ts, d.job_id AS sample_job, g.job_id AS allocated_job
            FROM day AS d
            LEFT JOIN job_gpus AS g
                ON g.cluster = d.cluster
                AND g.gpu_uuid = d.gpu_uuid
                AND d.ts >= g.start_ts
                AND (g.end_ts IS NULL OR d.ts < g.end_ts)
        )
        SELECT
            (SELECT count(*) FROM day) AS samples,
            count(*) AS matched_rows,
            count(sample_job) AS owned,
            count(*) FILTER (WHERE sample_job IS DISTINCT FROM allocated_job) AS wrong_owner
        FROM matched
        """,
        lo=lo,
        hi=lo + dt.timedelta(days=1),
    )
    assert row["samples"] > 0
    assert row["matched_rows"] == row["samples"], "a sample lies in two allocations"
    assert 0 < row["owned"] < row["samples"], "expected both owned and unallocated samples"
    assert row["wrong_owner"] == 0


# ---------------------------------------------------------------- the quirks of real data


def test_jobs_wait_in_the_queue(truth_con: duckdb.DuckDBPyConnection) -> None:
    row = _one(
        truth_con,
        "SELECT count(*) FILTER (WHERE start_ts > submit_ts) AS waited FROM jobs_latest",
    )
    assert row["waited"] > 0


def test_profiling_fields_are_blank_only_on_nodes_without_profiling(
    truth_con: duckdb.DuckDBPyConnection,
) -> None:
    row = _one(
        truth_con,
        """
        SELECT
            count(*) FILTER (WHERE sm_active IS NULL) AS blank,
            count(*) FILTER (WHERE sm_active IS NULL AND gpu_util_pct IS NULL) AS blank_util,
            count(*) FILTER (
                WHERE sm_active IS NULL AND node NOT IN (
                    SELECT subject_id FROM sim_truth WHERE label = 'no_profiling'
                )
            ) AS blank_elsewhere
        FROM gpu_samples
        """,
    )
    assert row["blank"] > 0
    assert row["blank_util"] == 0, "GPU_UTIL is not a profiling field: it should stay filled"
    assert row["blank_elsewhere"] == 0


def test_an_energy_counter_resets(truth_con: duckdb.DuckDBPyConnection) -> None:
    row = _one(
        truth_con,
        """
        SELECT count(*) AS decreases
        FROM (
            SELECT energy_j - lag(energy_j) OVER (PARTITION BY gpu_uuid ORDER BY ts) AS step
            FROM gpu_samples
        )
        WHERE step < 0
        """,
    )
    assert row["decreases"] >= 1


def test_failing_gpus_raise_xid_events(truth_con: duckdb.DuckDBPyConnection) -> None:
    failing = _rows(
        truth_con,
        """
        SELECT
            t.subject_id AS gpu_uuid,
            count(e.ts) AS xids
        FROM sim_truth AS t
        LEFT JOIN gpu_events AS e
            ON e.gpu_uuid = t.subject_id AND e.kind = 'xid'
            AND e.ts >= t.start_ts AND e.ts <= t.end_ts
        WHERE t.subject_kind = 'gpu' AND t.label = 'failing_gpu'
        GROUP BY t.subject_id
        """,
    )
    assert failing, "no failing GPU in the ground truth"
    for gpu in failing:
        assert gpu["xids"] >= 1, gpu


def test_sample_times_jitter_and_some_scrapes_are_lost(
    truth_con: duckdb.DuckDBPyConnection,
) -> None:
    row = _one(
        truth_con,
        """
        SELECT
            count(*) AS samples,
            count(DISTINCT epoch_ms(ts) % 1000) AS distinct_ms,
            (SELECT count(*) FROM gpus) AS gpus
        FROM gpu_samples
        """,
    )
    per_gpu = TRUTH.days * 86400 // TRUTH.interval_s
    assert row["distinct_ms"] > 100
    assert row["samples"] < row["gpus"] * per_gpu


# ---------------------------------------------------------------- realism of the default fleet


@pytest.fixture(scope="module")
def default_fleet_stats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """Per-sample and per-job statistics of the default fleet (the embedded demo)."""
    lake = tmp_path_factory.mktemp("default") / "lake"
    simulate(SimConfig(), Lake.at(lake))
    con = connect(lake, require=("gpu_samples",))
    try:
        stats = _one(
            con,
            """
            SELECT
                median(gpu_util_pct) AS gpu_util_median,
                median(sm_active) AS sm_active_median,
                avg(CAST(gpu_util_pct = 0 AS DOUBLE)) AS idle_sample_share,
                (
                    SELECT avg(CAST(state = 'FAILED' AS DOUBLE))
                    FROM jobs_latest
                    WHERE end_ts IS NOT NULL
                ) AS failed_job_share
            FROM gpu_samples
            """,
        )
    finally:
        con.close()
    return stats


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stat", "low", "high"),
    [
        ("gpu_util_median", 90, 100),  # AcmeTrace: 97-99 %
        ("sm_active_median", 0.25, 0.6),  # AcmeTrace: 34-50 %
        ("idle_sample_share", 0.15, 0.45),  # AcmeTrace: 31-34 % of samples at 0
        ("failed_job_share", 0.25, 0.55),  # AcmeTrace: 40-43 % of GPU jobs failed
    ],
)
def test_default_fleet_looks_like_a_real_llm_cluster(
    default_fleet_stats: dict[str, float], stat: str, low: float, high: float
) -> None:
    assert low <= default_fleet_stats[stat] <= high, default_fleet_stats


# ---------------------------------------------------------------- fair-share entitlements


def test_accounts_land_their_fair_share_entitlements_as_slurm_associations(
    truth_con: duckdb.DuckDBPyConnection,
) -> None:
    """The accounts' shares land in `associations`, as `collect slurm-shares` lands sacctmgr's
    tree, so fairness_weekly (and the report and Fairness page) see an entitlement per account."""
    con = truth_con
    accounts = {
        r["account"]: r for r in _rows(con, "SELECT * FROM associations WHERE user IS NULL")
    }
    users = _rows(con, "SELECT * FROM associations WHERE user IS NOT NULL")
    job_accounts = {r["account"] for r in _rows(con, "SELECT DISTINCT account FROM jobs")}
    entitled = {
        r["account"]: r["entitled_share"]
        for r in _rows(
            con,
            "SELECT account, entitled_share FROM fairness_weekly WHERE level = 'account'",
        )
    }
    user_entitled = _rows(con, "SELECT entitled_share FROM fairness_weekly WHERE level = 'user'")
    assert accounts["root"]["parent"] is None
    assert {a: r["raw_shares"] for a, r in accounts.items() if a != "root"} == {
        "llm-pretrain": 30,
        "nlp-research": 20,
        "vision": 15,
        "speech": 10,
        "platform": 10,
        "robotics": 10,
        "students": 5,
    }
    assert all(r["parent"] == "root" for a, r in accounts.items() if a != "root")
    assert all(r["source"] == "sim" and r["cluster"] == TRUTH.cluster for r in accounts.values())
    assert job_accounts <= set(accounts)
    assert users and all(r["raw_shares"] == 1 and r["account"] in accounts for r in users)
    # every account has its entitled share in the mart: raw shares normalised (they sum to 100)
    assert entitled["llm-pretrain"] == pytest.approx(0.30)
    assert entitled["students"] == pytest.approx(0.05)
    assert sum(entitled.values()) == pytest.approx(1.0)
    assert user_entitled and all(r["entitled_share"] is not None for r in user_entitled)


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpus": 0}, r"gpus .*0"),
        ({"days": 0}, r"days .*0"),
        ({"interval_s": 7}, r"interval_s .*divide a day.*7"),
        ({"interval_s": 7200}, r"interval_s .*7200"),
        ({"interval_s": 0}, r"interval_s .*0"),
        ({"start": dt.datetime(2026, 11, 2)}, r"start .*timezone"),
    ],
)
def test_bad_configs_are_refused_with_a_message_naming_them(
    changes: dict[str, Any], message: str
) -> None:
    cfg = SimConfig(**changes)
    with pytest.raises(ConfigError, match=message):
        cfg.validate()


def test_a_bad_config_is_refused_before_the_lake_is_touched(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    with pytest.raises(ConfigError):
        simulate(SimConfig(gpus=0), Lake.at(lake))
    assert not lake.exists()


def test_the_default_config_is_valid() -> None:
    SimConfig().validate()
    SimConfig(start=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), interval_s=15, gpus=1).validate()


# ---------------------------------------------------------------- GPU models


@pytest.mark.slow
def test_jobs_run_on_one_gpu_model_and_record_its_type(tmp_path: Path) -> None:
    """Over 128 GPUs the fleet has an A100 island: no job spans H100 and A100 nodes (NCCL does
    not cross models), and each job's `gpu_type` is the model it ran on."""
    lake = tmp_path / "lake"
    simulate(SimConfig(gpus=200, days=2, seed=11), Lake.at(lake))
    con = connect(lake, require=("gpu_samples",))
    try:
        per_job = con.sql(
            """
            SELECT j.job_id, any_value(j.gpu_type) AS gpu_type, any_value(j.gpus) AS gpus,
                list(DISTINCT g.model ORDER BY g.model) AS models
            FROM jobs_latest j
            JOIN job_gpus a USING (cluster, job_id)
            JOIN gpus g ON g.cluster = a.cluster AND g.node = a.node
                AND g.gpu_index = a.gpu_index
            GROUP BY j.job_id
            """
        ).fetchall()
        unstarted = con.execute(
            "SELECT count(*) FROM jobs_latest WHERE start_ts IS NULL AND gpu_type IS NOT NULL"
        ).fetchone()
    finally:
        con.close()
    expected = {"NVIDIA H100 80GB HBM3": "h100", "NVIDIA A100-SXM4-80GB": "a100"}
    assert [r for r in per_job if len(r[3]) != 1] == []
    assert [r for r in per_job if r[1] != expected[r[3][0]]] == []
    types = {r[1] for r in per_job}
    assert types == {"h100", "a100"}
    assert sum(r[2] > 8 for r in per_job) >= 3  # multi-node jobs were placed
    assert unstarted == (0,)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_event_lies_after_the_simulated_span(tmp_path: Path, seed: int) -> None:
    # The probe's 16 GPUs × 2 days, seed 2: a job still running at the end, failed later, had
    # its application XID landed 8.75 h after the last sample; the data's end moved there and
    # every running job "ran" past its limit in the replay.
    cfg = SimConfig(gpus=16, days=2, seed=seed)
    simulate(cfg, Lake.at(tmp_path))
    with _reading(tmp_path) as con:
        last = _one(con, "SELECT max(ts) AS ts FROM gpu_events")["ts"]
        start = _one(con, "SELECT min(ts) AS ts FROM gpu_samples")["ts"]
    assert last is None or last <= start + dt.timedelta(days=cfg.days)
