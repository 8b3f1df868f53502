"""Every dashboard page runs on a simulated lake, and explains an empty one (streamlit AppTest)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.bench.dashboard_timing import PAGES
from tests.dashboard.factories import (
    make_fairness_row,
    make_finding,
    make_recommendation,
    write_fairness,
    write_rows,
)
from warehouse.connection import WarehouseConfig, open_engine, register_table

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
TITLES = {
    "overview": "GPU-hours at a glance",
    "jobs": "Jobs",
    "job": "Job ",
    "users": "Users & accounts",
    "fairness": "Fairness",
    "health": "GPU health",
    "alerts": "Alerts & recommendations",
}
NAV_TITLES = {
    "overview": "Overview",
    "jobs": "Jobs",
    "job": "Job",
    "users": "Users & accounts",
    "fairness": "Fairness",
    "health": "Health",
    "alerts": "Alerts & recommendations",
}
INJECTIONS = ["' OR 1=1 --", "'; DROP TABLE jobs; --", '" OR ""="', "\\'; SELECT 1; --", "%%"]
# every free-text filter: (page, widget key)
SEARCH_BOXES = [
    ("jobs", "jobs_search"),
    ("users", "users_search"),
    ("health", "health_search"),
    ("alerts", "alerts_search"),
    ("alerts", "alerts_rec_search"),
    ("job", "job_id_input"),
]


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch):
    for name in ("GPULEDGER_DASHBOARD_MANAGERS", "GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR"):
        monkeypatch.delenv(name, raising=False)


# columns shown as bars (ProgressColumn, app/downloads.py): a null stays empty there
BARS = {"busy_mean", "efficiency", "sm_active_mean", "tensor_active_mean", "idle_share"}


def open_page(lake: Path, page: str, monkeypatch: pytest.MonkeyPatch, **state: object) -> AppTest:
    monkeypatch.setenv("GPULEDGER_LAKE", str(lake))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(PAGES[page])
    return at.run()


@pytest.fixture(scope="module")
def demo_page(demo_lake: Path) -> Callable[..., AppTest]:
    """`demo_page(page, **state)`: that page of the demo lake, run once per module for the tests
    that only read what it shows (a run is a third of a CPU-second or more)."""
    shown: dict[tuple[str, tuple[tuple[str, object], ...]], AppTest] = {}

    def run(page: str, **state: object) -> AppTest:
        key = (page, tuple(sorted(state.items())))
        if key not in shown:
            with pytest.MonkeyPatch.context() as env:
                shown[key] = open_page(demo_lake, page, env, **state)
        return shown[key]

    return run


def charts(at: AppTest) -> list[object]:
    return list(at.get("arrow_vega_lite_chart")) + list(at.get("vega_lite_chart"))


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_its_title_a_chart_and_tables(demo_page, page):
    at = demo_page(page)

    assert not at.exception, at.exception
    assert not at.error
    assert at.title[0].value.startswith(TITLES[page])
    assert charts(at), f"{page}: no chart"
    assert at.dataframe, f"{page}: no table"


@pytest.mark.parametrize("page", list(PAGES))
def test_no_table_shows_none_in_a_text_number_or_time_column(demo_page, page):
    # kg CO2e on Users & accounts, the last XID and its name on Health, a throttling
    # finding's job and user on Alerts, an open finding's end: a missing figure read "None"
    # (it is "—")
    at = demo_page(page)
    for table in (d.value for d in at.dataframe):
        for column in table.columns:
            values = table[column]
            if column.endswith("_share") or column in BARS:
                continue  # bars keep their kind
            assert not values.isna().any(), f"{page}: {column} shows None"


@pytest.mark.parametrize("page", list(PAGES))
@pytest.mark.parametrize("exists", [False, True], ids=["missing", "empty-folder"])
def test_every_page_on_an_empty_lake_says_what_to_run(tmp_path, monkeypatch, page, exists):
    if exists:
        (tmp_path / "nothing-here").mkdir()
    at = open_page(tmp_path / "nothing-here", page, monkeypatch)

    assert not at.exception
    assert at.title[0].value == NAV_TITLES[page]
    [error] = at.error
    assert "nothing-here" in error.value
    assert "gpuledger attribute" in error.value


def test_overview_headline_numbers_and_trend(demo_page):
    at = demo_page("overview")

    labels = [m.label for m in at.metric]
    assert labels == [
        "Occupancy",
        "Idle GPU-h",
        "Effective utilisation",
        "Energy kWh",
        "Cost of idle GPUs",
    ]
    assert at.metric[0].value.endswith("%")
    assert at.metric[4].value.startswith("$")  # the cost, in the configured currency
    # the default window is the whole 2-day lake, so there is no earlier window to compare with
    assert at.metric[1].delta is None or at.metric[1].delta == ""
    # the top jobs are whole runs, which may reach outside the dates: said, not implied
    assert "Jobs that ran in these dates, with the figures of their whole runs." in [
        c.value for c in at.caption
    ]


def test_fairness_of_the_simulator_compares_use_with_entitlements(plain_lake, monkeypatch):
    # the simulator lands its accounts' fair shares as Slurm associations, so the mart built by
    # `attribute` has entitled shares: ticks on the chart, Jain's index per week
    at = open_page(plain_lake, "fairness", monkeypatch)

    assert not at.exception, at.exception
    assert not at.info, [i.value for i in at.info]
    assert any("red ticks: entitled share" in c.value for c in at.caption)
    [accounts] = [d.value for d in at.dataframe if "alloc_gpu_h" in d.value.columns][:1]
    assert accounts["entitled_share"].notna().all()
    assert float(accounts["entitled_share"].sum()) == pytest.approx(1.0)
    [jain] = [d.value for d in at.dataframe if "jain_index" in d.value.columns]
    assert len(jain) >= 1 and jain["jain_index"].notna().all()
    assert len(charts(at)) >= 2  # shares with ticks, Jain's index over time


def test_fairness_without_entitlements_says_so_and_shows_dashes(plain_lake, tmp_path, monkeypatch):
    # a lake with no shares collected (no `collect slurm-shares`, no Kueue quotas) has no
    # entitlement to compare usage with: the page says so, draws no ticks and shows "—"
    lake = tmp_path / "lake"
    shutil.copytree(plain_lake, lake)
    shutil.rmtree(lake / "fairness_weekly")
    write_fairness(
        lake,
        [make_fairness_row("a", 0.7, None), make_fairness_row("b", 0.3, None)]
        + [make_fairness_row("a", 0.7, None, user="u")],
    )
    at = open_page(lake, "fairness", monkeypatch)

    assert not at.exception, at.exception
    assert "No account has an entitlement" in at.info[0].value
    assert not any("red ticks" in c.value for c in at.caption)
    tables = [d.value for d in at.dataframe if "entitled_share" in d.value.columns]
    assert len(tables) == 2  # accounts and users; no empty Jain's index table
    for table in tables:
        assert set(table["entitled_share"]) == {"—"}
        assert set(table["usage_ratio"]) == {"—"}
        assert "None" not in table.astype(str).to_numpy()


def test_jobs_state_filter_keeps_only_that_state(demo_lake, demo_con, monkeypatch):
    at = open_page(demo_lake, "jobs", monkeypatch, jobs_states=["FAILED"])

    [table] = [d.value for d in at.dataframe if "job_name" in d.value.columns]
    expected = demo_con.sql("SELECT count(*) FROM job_usage WHERE state = 'FAILED'").fetchall()[0][
        0
    ]
    assert set(table["state"]) == {"FAILED"}
    assert len(table) == expected


def test_jobs_search_finds_a_job_by_its_user(demo_lake, names, monkeypatch):
    at = open_page(demo_lake, "jobs", monkeypatch, jobs_search=names["user"].upper())

    [table] = [d.value for d in at.dataframe if "job_name" in d.value.columns]
    fields = ["job_id", "job_name", "user", "account"]
    assert len(table) > 0
    assert all(
        any(names["user"] in str(row[f] or "").lower() for f in fields)
        for _, row in table.iterrows()
    )
    assert names["user"] in set(table["user"])


def test_job_page_shows_a_chosen_job_with_timelines_findings_and_advice(demo_page, names):
    at = demo_page("job", job_id_input=names["job_id"])

    assert not at.exception
    assert at.title[0].value.startswith(f"Job {names['job_id']}")
    [findings] = [d.value for d in at.dataframe if "detector" in d.value.columns]
    assert sorted(findings["detector"]) == ["hung_job", "idle_job"]
    assert len(charts(at)) >= 3  # busy, memory and power at least
    assert at.subheader[0].value == "What to change next time"


def test_job_page_says_its_emissions_or_why_they_are_unknown(demo_page, names):
    at = demo_page("job", job_id_input=names["job_id"])

    # the demo lake is built without [emissions]: unknown, never 0 kg
    captions = [c.value.replace("\\", "") for c in at.caption]  # markdown escapes undone
    assert any(c.startswith("Emissions: unknown (") for c in captions), captions


def test_overview_says_the_windows_emissions_or_why_they_are_unknown(demo_page):
    at = demo_page("overview")

    assert not at.exception
    captions = [c.value.replace("\\", "") for c in at.caption]  # markdown escapes undone
    assert any(c.startswith("Emissions of the jobs' energy") and "unknown" in c for c in captions)


def test_unknown_job_is_no_match(demo_lake, monkeypatch):
    at = open_page(demo_lake, "job", monkeypatch, job_id_input="no-such-job")

    assert not at.exception
    assert "No match" in at.info[0].value


def test_a_job_that_never_started_is_shown_as_not_started(demo_lake, tmp_path, monkeypatch):
    # its owner was told "no job '1134' of yours": the page read job_usage alone, which has no
    # row for a job that held no GPU
    import pyarrow as pa
    import pyarrow.parquet as pq

    from warehouse.writer import write_batch

    lake = tmp_path / "lake"
    shutil.copytree(demo_lake, lake)
    row = pq.read_table(min((lake / "jobs").rglob("*.parquet"))).slice(0, 1)
    row = row.drop_columns([name for name in row.column_names if name.startswith("_")])
    job_id, user, state = "99999", str(row.column("user")[0]), "PENDING"
    changes = {"job_id": job_id, "state": state, "start_ts": None, "end_ts": None}
    for name, value in changes.items():
        i = row.schema.get_field_index(name)
        row = row.set_column(i, row.schema.field(i), pa.array([value], row.schema.field(i).type))
    write_batch(lake, "jobs", row, "pending")
    at = open_page(lake, "job", monkeypatch, job_id_input=job_id)

    assert not at.exception, at.exception
    assert not any("No match" in box.value for box in at.info)
    assert at.title[0].value.startswith(f"Job {job_id}")
    assert "not started" in at.caption[0].value and str(user) in at.caption[0].value
    assert any(f"has not started ({state})" in box.value for box in at.info)


def lake_files(lake: Path) -> dict[str, tuple[int, int]]:
    """Every file of the lake (relative path) -> (size, mtime_ns)."""
    return {
        str(path.relative_to(lake)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in lake.rglob("*")
        if path.is_file()
    }


@pytest.fixture(scope="module")
def demo_jobs(demo_con) -> list[tuple[int, ...]]:
    """The demo lake's jobs as `connect` counts them, once a module: no search box changes it."""
    return demo_con.sql("SELECT count(*) FROM jobs").fetchall()


def jobs_count(lake: Path) -> list[tuple[int, ...]]:
    """The same count through the `jobs` view alone (`connect` registers every table and the
    derived views, a third of a second a connection)."""
    with open_engine(WarehouseConfig(lake)) as con:
        register_table(con, lake, "jobs")
        return con.sql("SELECT count(*) FROM jobs").fetchall()


@pytest.mark.parametrize(("page", "key"), SEARCH_BOXES)
def test_sql_injection_in_a_search_box_is_just_no_match(
    demo_lake, demo_jobs, monkeypatch, page, key
):
    files = lake_files(demo_lake)
    first, *others = INJECTIONS

    # each attempt typed into the box of a page already open: the page runs again with it
    at = open_page(demo_lake, page, monkeypatch, **{key: first})
    for attempt in [first, *others]:
        if attempt != first:
            at.session_state[key] = attempt
            at.run()

        assert not at.exception, (attempt, at.exception)
        assert not at.error, attempt
        assert any("No match" in info.value for info in at.info), [i.value for i in at.info]
        # nothing on disk changed (a file listing: a new connection each time costs 0.1 s)
        assert lake_files(demo_lake) == files, attempt
    assert jobs_count(demo_lake) == demo_jobs


def test_recommendation_shows_its_exact_config_in_a_code_block(demo_page, names):
    at = demo_page("alerts")

    codes = [c.value for c in at.code]
    assert f"scontrol update NodeName={names['node']} State=DRAIN Reason=failing-gpu" in codes
    assert "scontrol update PartitionName=interactive MaxTime=04:00:00" in codes


def test_health_lists_the_drain_candidate(demo_page, names):
    at = demo_page("health")

    [risk] = [d.value for d in at.dataframe if "drain_candidate" in d.value.columns]
    assert list(risk["node"]) == [names["node"]]
    assert list(risk["drain_candidate"]) == [True]
    assert any(f"NodeName={names['node']} State=DRAIN" in c.value for c in at.code)


def test_health_counts_drain_candidates_without_trained_models(plain_lake, tmp_path, monkeypatch):
    # no model trained, so nothing predicted: a critical XID on one node and a drain_node
    # recommendation for another still make two drain candidates, and the page says why
    lake = tmp_path / "lake"
    shutil.copytree(plain_lake, lake)
    write_rows(
        lake,
        "findings",
        [
            make_finding(
                "f-xid",
                detector="xid_hardware",
                severity="critical",
                subject_kind="gpu",
                node="gpu-002",
                gpu_uuid="GPU-x",
                message="XID 79: fell off the bus",
            )
        ],
        "handmade",
    )
    write_rows(
        lake,
        "recommendations",
        [make_recommendation("r-drain", kind="drain_node", scope="node=gpu-001")],
        "handmade",
    )
    at = open_page(lake, "health", monkeypatch)

    assert not at.exception, at.exception
    [metric] = [m for m in at.metric if m.label == "Drain candidates"]
    assert metric.value == "2"
    assert "drain_node" in metric.help and "critical hardware finding" in metric.help
    [risk] = [d.value for d in at.dataframe if "drain_candidate" in d.value.columns]
    reasons = dict(zip(risk["node"], risk["drain_reason"], strict=True))
    assert reasons == {
        "gpu-001": "drain_node recommendation",
        "gpu-002": "critical hardware finding",
    }


def test_search_text_is_literal_not_a_like_pattern(demo_lake, monkeypatch):
    at = open_page(demo_lake, "alerts", monkeypatch, alerts_search="100 %")

    [feed] = [d.value for d in at.dataframe if "finding_id" in d.value.columns]
    assert list(feed["finding_id"]) == ["f-hung"]  # its message: "GPU_UTIL 100 % with SM ..."


def test_a_job_picked_on_the_jobs_page_opens_on_the_job_page(demo_lake, names, monkeypatch):
    # the Jobs page's "Open job" button leaves the pick in job_selected and switches page
    at = open_page(demo_lake, "job", monkeypatch, job_selected=names["job_id"])

    assert at.title[0].value.startswith(f"Job {names['job_id']}")
    assert at.query_params["job"] == names["job_id"]


def test_overview_trend_compares_with_the_window_before(demo_lake, demo_con, monkeypatch):
    import datetime as dt

    from warehouse import queries

    day1, day2 = dt.date(2026, 11, 2), dt.date(2026, 11, 3)
    at = open_page(demo_lake, "overview", monkeypatch, scope_dates_sim=(day2, day2))

    def idle_h(day: dt.date) -> float:
        start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
        frame = queries.run(
            demo_con,
            "dashboard/cluster_window_summary",
            cluster="sim",
            start=start,
            end=start + dt.timedelta(days=1),
        )
        return float(frame.get_column("idle_allocated_gpu_h")[0])

    idle = at.metric[1]
    assert idle.value == f"{idle_h(day2):,.0f}"
    assert idle.delta == f"{idle_h(day2) - idle_h(day1):+,.0f}"


def test_overview_trend_after_a_gap_in_the_telemetry_compares_the_windows_hours_of_data(
    tmp_path, monkeypatch
):
    """A job idle on one GPU for 1 h on day 0, one idle on two GPUs for 1 h on day 8, nothing
    between: the week of day 8 and the week before each hold 1 h of data, and idle GPU-hours
    went from 1 to 2. Counted from the data's first and last sample anywhere (145 h against
    48 h), the week before was scaled 3 times and the trend said -1."""
    from tests.marts import rows as r

    day, late = 86400, range(8 * 86400, 8 * 86400 + 3600, 30)
    lake = tmp_path / "lake"
    r.build_lake(
        lake,
        samples=r.samples(range(0, 3600, 30), gpu_util_pct=0.0)
        + r.samples(late, gpu_util_pct=0.0)
        + r.samples(late, gpu_index=1, gpu_util_pct=0.0),
        jobs=[r.job("j1", 0, 3600.0), r.job("j2", 8 * day, 8 * day + 3600.0)],
        job_gpus=[
            r.job_gpu("j1", 0, 3600.0),
            r.job_gpu("j2", 8 * day, 8 * day + 3600.0),
            r.job_gpu("j2", 8 * day, 8 * day + 3600.0, gpu_index=1),
        ],
    ).close()
    first, last = r.at(2 * day).date(), r.at(8 * day).date()

    at = open_page(lake, "overview", monkeypatch, **{f"scope_dates_{r.CLUSTER}": (first, last)})

    assert not at.exception, at.exception
    idle = next(m for m in at.metric if m.label == "Idle GPU-h")
    assert (idle.value, idle.delta) == ("2", "+1")
    assert "scaled" not in at.caption[0].value


def test_job_page_shows_the_training_loops_throughput_and_mfu(demo_lake, demo_con, monkeypatch):
    # the simulator's training jobs report through the throughput callback (collector/sim)
    [(job_id, rate, mfu)] = demo_con.sql(
        "SELECT job_id, tokens_per_s_per_gpu, mfu FROM job_usage WHERE mfu IS NOT NULL "
        "ORDER BY alloc_gpu_h DESC, job_id LIMIT 1"
    ).fetchall()
    at = open_page(demo_lake, "job", monkeypatch, job_id_input=job_id)

    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens/s per GPU"] == f"{rate:,.0f}"
    assert metrics["MFU"] == f"{100 * mfu:.0f} %"


def test_a_cluster_known_from_its_scheduler_alone_shows_its_jobs(tmp_path, monkeypatch):
    """No samples, only sacct's records: `attribute` builds the allocation marts, and the
    dashboard showed "no samples yet" on every page instead of the jobs."""
    from tests.marts import rows as r

    lake = tmp_path / "lake"
    r.build_lake(
        lake,
        jobs=[r.job("j1", 0, 7200.0), r.job("j2", 3600.0, 10800.0, user="bob")],
        job_gpus=[r.job_gpu("j1", 0, 7200.0), r.job_gpu("j2", 3600.0, 10800.0, gpu_index=1)],
    ).close()

    overview = open_page(lake, "overview", monkeypatch)
    jobs = open_page(lake, "jobs", monkeypatch)

    assert not overview.exception and not overview.error
    assert [i.value for i in overview.info] == [
        f"Cluster {r.CLUSTER!r} has no GPU telemetry in the lake, only its scheduler's records: "
        "its jobs and what they were allocated are on the Jobs and Fairness pages. Collect its "
        "GPUs' samples (`gpuledger collect`) for occupancy and idle time."
    ]
    assert not jobs.exception and not jobs.error
    [table] = [d.value for d in jobs.dataframe if "job_id" in d.value.columns]
    assert sorted(table["job_id"]) == ["j1", "j2"]


def chart_rows(at: AppTest) -> list[list[dict[str, object]]]:
    """Each chart's data rows, in the page's order."""
    import pyarrow as pa

    return [
        [
            row
            for d in e.proto.datasets
            for row in pa.ipc.open_stream(d.data.data).read_all().to_pylist()
        ]
        for e in charts(at)
    ]


def _users_lake(root: Path, *, telemetry: bool, power_w: float | None = 300.0) -> Path:
    """alice's jobs in two accounts (j1 physics, 1 GPU for 2 h; j3 biology, 1 h) and bob's
    (j2 physics, 2 h); with `telemetry`, j1 busy 0.9, j3 idle, j2 busy 0.5, drawing
    `power_w`."""
    from tests.marts import rows as r

    spans = {"j1": (0.0, 7200.0, 0), "j2": (0.0, 7200.0, 1), "j3": (0.0, 3600.0, 2)}
    busy = {"j1": 0.9, "j2": 0.5, "j3": 0.0}
    accounts = {"j1": ("alice", "physics"), "j2": ("bob", "physics"), "j3": ("alice", "biology")}
    samples = [
        row
        for job, (start, end, gpu) in spans.items()
        for row in r.samples(
            range(int(start), int(end), 30),
            gpu_index=gpu,
            sm_active=busy[job],
            gpu_util_pct=100 * busy[job],
            power_w=power_w,
        )
    ]
    r.build_lake(
        root,
        samples=samples if telemetry else [],
        jobs=[
            r.job(j, start, end, user=accounts[j][0], account=accounts[j][1])
            for j, (start, end, _) in spans.items()
        ],
        job_gpus=[
            r.job_gpu(j, start, end, gpu_index=gpu) for j, (start, end, gpu) in spans.items()
        ],
    ).close()
    return root


def test_hours_no_telemetry_saw_are_drawn_and_shown_as_unknown_not_used_or_zero(
    tmp_path, monkeypatch
):
    """A cluster with its scheduler's records alone: every account's and user's bar was all
    "used while allocated", the tables and the job page said 0 idle GPU-hours and 0 kWh."""
    lake = _users_lake(tmp_path / "lake", telemetry=False)

    users = open_page(lake, "users", monkeypatch)
    job = open_page(lake, "job", monkeypatch, job_id_input="j1")
    jobs = open_page(lake, "jobs", monkeypatch)

    assert not users.exception and not job.exception and not jobs.exception
    by_account, by_user = chart_rows(users)[:2]
    assert {(row["who"], row["part"]): row["gpu_h"] for row in by_user if row["gpu_h"]} == {
        ("alice", "allocated, no telemetry"): pytest.approx(3.0),
        ("bob", "allocated, no telemetry"): pytest.approx(2.0),
    }
    assert {row["part"] for row in by_account if row["gpu_h"]} == {"allocated, no telemetry"}
    [accounts] = [d.value for d in users.dataframe if "account" in d.value.columns][:1]
    assert set(accounts["idle_gpu_h"]) == set(accounts["energy_kwh"]) == {"—"}
    metrics = {m.label: m.value for m in job.metric}
    assert (metrics["Idle GPU-h"], metrics["Energy kWh"]) == ("—", "—")
    assert "idle unknown (no telemetry saw them)" in jobs.caption[0].value


def test_energy_no_sample_carried_is_unknown_on_the_overview_not_zero(tmp_path, monkeypatch):
    lake = _users_lake(tmp_path / "lake", telemetry=True, power_w=None)

    at = open_page(lake, "overview", monkeypatch)

    assert not at.exception, at.exception
    assert {m.label: m.value for m in at.metric}["Energy kWh"] == "—"


@pytest.mark.parametrize(
    ("rank_by", "order"),
    [("GPU-hours", ["alice", "bob"]), ("Lowest efficiency", ["bob", "alice"])],
)
def test_the_users_chart_has_one_bar_per_user_over_their_accounts_in_the_order_picked(
    tmp_path, monkeypatch, rank_by, order
):
    """alice's 3 GPU-hours are in two accounts: the chart kept one of her rows (the first of
    the order picked: her idle biology hour, ranked by efficiency), and re-sorted by GPU-hours
    whatever the pick."""
    lake = _users_lake(tmp_path / "lake", telemetry=True)

    at = open_page(lake, "users", monkeypatch, users_rank_by=rank_by)

    assert not at.exception, at.exception
    by_user = [rows for rows in chart_rows(at) if rows and "who" in rows[0]][1]
    assert list(dict.fromkeys(row["who"] for row in by_user)) == order
    parts = {(row["who"], row["part"]): row["gpu_h"] for row in by_user}
    assert parts[("alice", "used while allocated")] == pytest.approx(2.0)
    assert parts[("alice", "allocated, idle")] == pytest.approx(1.0)
    assert parts[("bob", "used while allocated")] == pytest.approx(2.0)


@pytest.mark.parametrize("page", list(PAGES))
def test_a_lake_of_telemetry_alone_shows_its_gpus_hours_on_every_page(tmp_path, monkeypatch, page):
    """Samples and built marts, no scheduler record yet: every page stopped with "has no data
    for 'job_usage' … build the marts with `gpuledger attribute`", which had been run."""
    from tests.marts import rows as r

    lake = tmp_path / "lake"
    busy = r.samples(range(0, 7200, 30), gpu_util_pct=90.0, sm_active=0.8, power_w=400.0)
    idle = r.samples(range(0, 7200, 30), gpu_index=1, gpu_util_pct=0.0, power_w=60.0)
    r.build_lake(lake, samples=busy + idle).close()

    at = open_page(lake, page, monkeypatch)

    assert not at.exception, at.exception
    assert not any("gpuledger attribute" in e.value for e in at.error), [e.value for e in at.error]
    if page == "overview":  # its GPUs' 2 h: 400 W and 60 W, none allocated
        metrics = {m.label: m.value for m in at.metric}
        # 0.92 kWh (it read "1", and a day of 0.36 kWh "0")
        assert metrics["Energy kWh"] == "0.92" and metrics["Occupancy"] == "0.0 %"
        # nothing before the data: no trend, and no "scaled" hours
        assert "no trends: the 1 day(s) before hold no data" in at.caption[0].value


def test_a_job_link_opens_on_its_cluster(tmp_path, monkeypatch):
    # ?job=1002&cluster=beta opened the first cluster's job 1002 (another user's), the link's
    # cluster ignored, and the page did not say which cluster it showed
    from tests.marts import rows as r

    for cluster in ("alpha", "beta"):
        r.build_lake(
            tmp_path,
            samples=[s | {"cluster": cluster} for s in r.samples(range(0, 3600, 60))],
            jobs=[r.job("1002", 0, 3600, user=f"user-{cluster}") | {"cluster": cluster}],
            job_gpus=[r.job_gpu("1002", 0, 3600) | {"cluster": cluster}],
        )
    monkeypatch.setenv("GPULEDGER_LAKE", str(tmp_path))
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.query_params["job"] = "1002"
    at.query_params["cluster"] = "beta"
    at.switch_page(PAGES["job"])
    at.run()

    assert not at.exception, at.exception
    assert at.caption[0].value.startswith("cluster beta · user\\-beta")  # (md escapes "-")
    assert at.query_params["cluster"] in ("beta", ["beta"])


def test_the_dates_reach_the_minutes_the_data_runs_past_its_last_midnight(tmp_path, monkeypatch):
    # One GPU held from 22:00 to 00:02 the next day, sampled to the end: the last bucket starts
    # at midnight, so the picker stopped on the first day and the widest window showed 2.0 of
    # the job's 2.03 GPU-hours (usage_daily counts the 2 minutes on the second day)
    from tests.marts import rows as r

    start, end = 22 * 3600, 24 * 3600 + 120
    lake = tmp_path / "lake"
    r.build_lake(
        lake,
        samples=r.samples(range(start, end, 30), engine_active=0.5),
        jobs=[r.job("j1", start, end)],
        job_gpus=[r.job_gpu("j1", start, end)],
    ).close()
    days = (r.at(start).date(), r.at(end).date())

    at = open_page(lake, "users", monkeypatch, **{f"scope_dates_{r.CLUSTER}": days})

    assert not at.exception, at.exception
    tables = {d.value.columns[0]: d.value for d in at.dataframe}
    expected = (end - start) / 3600
    assert tables["account"]["alloc_gpu_h"].sum() == pytest.approx(expected)
    assert tables["user"]["alloc_gpu_h"].sum() == pytest.approx(expected)
