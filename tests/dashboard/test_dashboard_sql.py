"""The dashboard's queries on a few hand-made rows whose answers were worked out by hand."""

from __future__ import annotations

import datetime as dt
from importlib.resources import files

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from tests.dashboard.factories import FAIRNESS_SCHEMA, T0, make_fairness_row, make_finding
from tests.infra.examples import examples
from warehouse import queries
from warehouse.schema import TABLES

WEEK = {"cluster": "sim", "start": T0, "end": T0 + dt.timedelta(days=7)}
JOB_FILTERS = {
    "viewer": None,
    "needle": "",
    "users": [],
    "accounts": [],
    "partitions": [],
    "states": [],
    "min_idle_gpu_h": 0.0,
    "limit": 100,
}


def h(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def table(name: str, rows: list[dict[str, object]]) -> pa.Table:
    schema = TABLES[name].schema
    full = [{f.name: row.get(f.name) for f in schema} for row in rows]
    return pa.Table.from_pylist(full, schema=schema)


@pytest.fixture(scope="module")
def engine():
    """One engine for the module with the shipped `xid_classes` (an engine and the CSV's view
    cost 0.07 CPU-s)."""
    with duckdb.connect() as con:
        con.read_csv(
            str(files("warehouse").joinpath("data", "xid_classes.csv")), header=True
        ).create_view("xid_classes")
        yield con


@pytest.fixture
def con(engine):
    """A cursor of its own, in UTC: the tables a test registers are its own temporary views."""
    with engine.cursor() as con:
        con.execute("SET TimeZone = 'UTC'")
        yield con


def job(job_id, user, account, state, start_h, end_h, idle, observed, effective, **more):
    return {
        "cluster": "sim",
        "job_id": job_id,
        "user": user,
        "account": account,
        "partition": "gpu",
        "state": state,
        "start_ts": h(start_h),
        "end_ts": None if end_h is None else h(end_h),
        "gpus": 1,
        "alloc_gpu_h": observed,
        "observed_gpu_h": observed,
        "idle_gpu_h": idle,
        "effective_gpu_h": effective,
        "busy_mean": effective / observed if observed else None,
        **more,
    }


def day(n, user, account, *, alloc, observed=None, idle=0.0, effective=0.0):
    """A usage_daily row: day n of the week (negative: before it)."""
    return {
        "cluster": "sim",
        "date": (T0 + dt.timedelta(days=n)).date(),
        "account": account,
        "user": user,
        "alloc_gpu_h": alloc,
        "observed_gpu_h": alloc if observed is None else observed,
        "idle_gpu_h": idle,
        "effective_gpu_h": effective,
    }


@pytest.fixture
def jobs_con(con):
    return add_jobs(con)


def add_jobs(con):
    usage = table(
        "job_usage",
        [
            job("1", "alice", "vision", "CANCELLED by 123", 1, 5, 3.0, 4.0, 0.4),
            job("2", "bob", "speech", "COMPLETED", 2, 12, 1.0, 10.0, 9.0),
            job("3", "alice", "vision", "COMPLETED", 2, 32, 0.0, 30.0, 2.6),
            job("4", "alice", "vision", "COMPLETED", -50, -10, 9.0, 9.0, 0.0),  # before the week
            # ended the instant the week began: it ran none of it (it was listed, and counted
            # as a job of dave's with no GPU-hours, in this week and the one before)
            job("6", "dave", "speech", "COMPLETED", -5, 0, 1.0, 5.0, 4.0),
            # still running, past the week's end: 92 GPU-hours allocated, 68 of them in the week
            job("5", "carol", "speech", "RUNNING", 100, None, 0.5, 1.0, 1.0, alloc_gpu_h=92.0),
        ],
    )
    con.register("job_usage", usage)
    # the same jobs per day (job 3 runs over two days; job 5 from day 4 04:00 past the week)
    con.register(
        "usage_daily",
        table(
            "usage_daily",
            [
                day(0, "alice", "vision", alloc=26.0, idle=3.0, effective=2.3),
                day(1, "alice", "vision", alloc=8.0, idle=0.0, effective=0.7),
                day(-3, "alice", "vision", alloc=9.0, idle=9.0, effective=0.0),  # job 4
                day(0, "bob", "speech", alloc=10.0, idle=1.0, effective=9.0),
                day(4, "carol", "speech", alloc=20.0, observed=1.0, idle=0.5, effective=1.0),
                day(5, "carol", "speech", alloc=24.0, observed=0.0),
                day(6, "carol", "speech", alloc=24.0, observed=0.0),
                day(7, "carol", "speech", alloc=24.0, observed=0.0),  # after the week
            ],
        ),
    )
    latest = table(
        "jobs",
        [
            {"cluster": "sim", "job_id": "1", "job_name": "Notebook", "updated_ts": h(5)},
            {"cluster": "sim", "job_id": "2", "job_name": "bert-ft", "updated_ts": h(12)},
            {"cluster": "sim", "job_id": "3", "job_name": "llm", "updated_ts": h(32)},
            {"cluster": "sim", "job_id": "5", "job_name": "serve", "updated_ts": h(101)},
        ],
    )
    con.register("jobs_latest", latest)
    # the cluster's telemetry ends at hour 150, after job 5's record was last collected (101)
    con.register("cluster_data_end", pa.table({"cluster": ["sim"], "end_e": [h(150).timestamp()]}))
    return con


def job_ids(con, **filters):
    frame = queries.run(con, "dashboard/job_table", **WEEK, **{**JOB_FILTERS, **filters})
    return frame.get_column("job_id").to_list()


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["1", "2", "5", "3"]),  # most idle first; jobs 4 and 6 ended before the week
        ({"needle": "ali"}, ["1", "3"]),  # user
        ({"needle": "note"}, ["1"]),  # job name (lower-cased by the caller)
        ({"needle": "speech"}, ["2", "5"]),  # account
        ({"states": ["CANCELLED"]}, ["1"]),  # 'CANCELLED by 123' counts as CANCELLED
        ({"users": ["bob", "carol"]}, ["2", "5"]),
        ({"accounts": ["vision"], "min_idle_gpu_h": 2.0}, ["1"]),
        ({"viewer": "bob"}, ["2"]),
        ({"viewer": "bob", "needle": "ali"}, []),
        ({"needle": "' or 1=1 --"}, []),
        ({"needle": "%"}, []),  # literal, not a LIKE wildcard
        ({"limit": 2}, ["1", "2"]),
    ],
)
def test_job_table_filters(jobs_con, filters, expected):
    assert job_ids(jobs_con, **filters) == expected


def test_a_job_that_began_and_ended_as_the_window_began_is_in_it(jobs_con):
    # a job that failed at launch, start = end = the window's start: none of its time is before
    # the window, so it is this window's (it was in none, once a job ended at the start was not)
    rows = jobs_con.sql("SELECT * FROM job_usage").to_arrow_table()
    launch = table("job_usage", [job("8", "erin", "vision", "FAILED", 0, 0, 0.0, 0.0, 0.0)])
    jobs_con.register("job_usage", pa.concat_tables([rows, launch.cast(rows.schema)]))

    assert "8" in job_ids(jobs_con)
    board = queries.run(jobs_con, "dashboard/user_leaderboard", **WEEK, viewer=None, needle="")
    assert "erin" in board["user"].to_list()


def test_job_table_figures(jobs_con):
    row = queries.run(jobs_con, "dashboard/job_table", **WEEK, **JOB_FILTERS).row(0, named=True)

    assert row["state"] == "CANCELLED"
    assert row["runtime_h"] == pytest.approx(4.0)
    assert row["idle_share"] == pytest.approx(3.0 / 4.0)


def test_a_running_jobs_run_time_reaches_the_end_of_its_clusters_data(jobs_con):
    # as `gpuledger job` counts it: the later of the data's end (150) and its record's last
    # collection (101); the record's time alone said 1 h beside 92 GPU-hours on 1 GPU
    frame = queries.run(jobs_con, "dashboard/job_table", **{**WEEK, **JOB_FILTERS})
    [running] = frame.filter(frame["job_id"] == "5").rows(named=True)

    assert running["runtime_h"] == pytest.approx(50.0)


def test_user_leaderboard_weights_efficiency_by_observed_hours(jobs_con):
    frame = queries.run(jobs_con, "dashboard/user_leaderboard", **WEEK, viewer=None, needle="")
    alice = frame.filter(frame["user"] == "alice").row(0, named=True)

    assert frame.get_column("user").to_list() == ["carol", "alice", "bob"]  # by allocated
    assert alice["jobs"] == 2 and alice["alloc_gpu_h"] == pytest.approx(34.0)
    assert alice["efficiency"] == pytest.approx((0.4 + 2.6) / (4.0 + 30.0))
    assert alice["idle_share"] == pytest.approx(3.0 / 34.0)


def test_account_leaderboard_for_a_viewer_counts_only_their_jobs(jobs_con):
    frame = queries.run(jobs_con, "dashboard/account_leaderboard", **WEEK, viewer="carol")

    assert frame.select("account", "users", "jobs", "alloc_gpu_h").rows() == [
        ("speech", 1, 1, 68.0)
    ]


def test_a_viewer_named_in_another_case_sees_their_jobs(jobs_con):
    """A sign-in names `Carol` as the scheduler's `carol` (or the reverse): user names match in
    any case, so the viewer's own jobs are not an empty page."""
    frame = queries.run(jobs_con, "dashboard/account_leaderboard", **WEEK, viewer="Carol")

    assert frame.select("account", "users", "jobs").rows() == [("speech", 1, 1)]


def test_the_leaderboards_count_the_gpu_hours_inside_the_window(jobs_con):
    # carol's job runs past the week's end: the week holds 68 of its 92 GPU-hours (it counted
    # whole, and one-day windows of a 32-GPU cluster showed 1,345 GPU-hours of 768)
    accounts = queries.run(jobs_con, "dashboard/account_leaderboard", **WEEK, viewer=None)
    users = queries.run(jobs_con, "dashboard/user_leaderboard", **WEEK, viewer=None, needle="")

    assert dict(accounts.select("account", "alloc_gpu_h").rows()) == pytest.approx(
        {"speech": 68.0 + 10.0, "vision": 34.0}
    )
    assert dict(users.select("user", "alloc_gpu_h").rows()) == pytest.approx(
        {"carol": 68.0, "alice": 34.0, "bob": 10.0}
    )
    carol = users.filter(users["user"] == "carol").row(0, named=True)
    assert carol["efficiency"] == pytest.approx(1.0) and carol["idle_share"] == pytest.approx(0.5)


def test_efficiency_histogram_bands(con):
    con.register(
        "job_usage",
        table(
            "job_usage",
            [
                job("a", "u", "x", "COMPLETED", 1, 2, 0, 2.0, 0.1),  # busy 0.05
                job("b", "u", "x", "COMPLETED", 1, 2, 0, 3.0, 0.45),  # busy 0.15
                job("c", "u", "x", "COMPLETED", 1, 2, 0, 4.0, 4.0),  # busy 1.0 -> top band
                job("d", "u", "x", "COMPLETED", 1, 2, 0, 1.0, 0.95),  # busy 0.95
                job("e", "u", "x", "COMPLETED", 1, 2, 0, 0.0, 0.0),  # never observed: out
            ],
        ),
    )
    frame = queries.run(con, "dashboard/efficiency_histogram", **WEEK, viewer=None)

    assert frame.select("band", "jobs", "alloc_gpu_h").rows() == [
        ("0–10 %", 1, 2.0),
        ("10–20 %", 1, 3.0),
        ("90–100 %", 2, 5.0),
    ]


def test_findings_feed_orders_by_severity_and_keeps_the_window(con):
    con.register(
        "findings",
        table(
            "findings",
            [
                make_finding("old", start_h=-30, end_h=-20),  # ended before the window
                make_finding("w1", severity="warn", end_h=3, user="alice"),
                make_finding("c1", severity="critical", end_h=None, user="bob"),
                make_finding("i1", severity="info", end_h=2, user="alice", job_id="7"),
            ],
        ),
    )
    args = {
        **WEEK,
        "viewer": None,
        "needle": "",
        "severities": [],
        "subject_kinds": [],
        "job_id": None,
        "limit": 10,
    }
    feed = queries.run(con, "dashboard/findings_feed", **args)

    assert feed.select("finding_id", "status").rows() == [
        ("c1", "open"),
        ("w1", "ended"),
        ("i1", "ended"),
    ]
    ids = queries.run(con, "dashboard/findings_feed", **{**args, "viewer": "alice"})
    assert ids.get_column("finding_id").to_list() == ["w1", "i1"]
    one_job = queries.run(con, "dashboard/findings_feed", **{**args, "job_id": "7"})
    assert one_job.get_column("finding_id").to_list() == ["i1"]
    crit = queries.run(con, "dashboard/findings_feed", **{**args, "severities": ["critical"]})
    assert crit.get_column("finding_id").to_list() == ["c1"]


def test_failure_risk_by_node_picks_drain_candidates(con):
    gpu = {"subject_kind": "gpu", "predicted": True}
    con.register(
        "findings",
        table(
            "findings",
            [
                make_finding("a", node="n1", gpu_uuid="g1", score=0.5, **gpu),
                make_finding("b", node="n1", gpu_uuid="g2", score=0.8, **gpu),  # n1: 0.8 >= 0.7
                make_finding("c", node="n2", gpu_uuid="g3", score=0.2, severity="critical", **gpu),
                make_finding("d", node="n3", gpu_uuid="g4", score=0.3, **gpu),  # n3: keep
                make_finding("e", node="n4", gpu_uuid="g5", score=0.99, subject_kind="gpu"),
                make_finding("f", node="n5", score=0.99, predicted=True),  # a job finding
            ],
        ),
    )
    con.register("recommendations", table("recommendations", []))
    frame = queries.run(con, "dashboard/failure_risk_by_node", **WEEK, drain_score=0.7)

    assert frame.select("node", "risk_score", "gpus_at_risk", "drain_candidate").rows() == [
        ("n1", pytest.approx(0.8), 2, True),
        ("n2", pytest.approx(0.2), 1, True),
        ("n3", pytest.approx(0.3), 1, False),
    ]


def test_drain_candidates_also_count_critical_hardware_and_drain_recommendations(con):
    # untrained models predict nothing: a node is still a drain candidate when a hardware
    # detector found something critical on it (XID 79, row-remap failure) or `recommend`
    # proposed draining it; the query says which of the three made it one
    from tests.dashboard.factories import make_recommendation

    gpu = {"subject_kind": "gpu"}
    con.register(
        "findings",
        table(
            "findings",
            [
                make_finding(
                    "x",
                    node="n1",
                    gpu_uuid="g1",
                    detector="xid_hardware",
                    severity="critical",
                    **gpu,
                ),
                make_finding("t", node="n2", gpu_uuid="g2", detector="throttling", **gpu),  # warn
                make_finding("p", node="n3", gpu_uuid="g3", score=0.9, predicted=True, **gpu),
            ],
        ),
    )
    con.register(
        "recommendations",
        table(
            "recommendations",
            [
                make_recommendation("d1", kind="drain_node", scope="node=n1"),
                make_recommendation("d4", kind="drain_node", scope="node=n4"),
                make_recommendation("o", kind="drain_node", scope="node=n9", cluster="other"),
            ],
        ),
    )
    frame = queries.run(con, "dashboard/failure_risk_by_node", **WEEK, drain_score=0.7)

    rows = {r["node"]: r for r in frame.iter_rows(named=True)}
    assert sorted(rows) == ["n1", "n3", "n4"]
    assert all(r["drain_candidate"] for r in rows.values())
    assert rows["n1"]["drain_reason"] == "drain_node recommendation; critical hardware finding"
    assert rows["n1"]["risk_score"] is None and rows["n1"]["critical_findings"] == 1
    assert rows["n3"]["drain_reason"] == "predicted failure risk"
    assert rows["n4"]["drain_reason"] == "drain_node recommendation"
    assert rows["n4"]["findings"] == 0
    # at stake: the larger of the findings' figure and the recommendation's gain (not added)
    assert rows["n4"]["gpu_h_at_stake"] == pytest.approx(10.0)
    assert rows["n4"]["first_event_ts"] is None
    # the event times are the findings' own span, not when detect ran
    assert rows["n1"]["first_event_ts"] == T0 + dt.timedelta(hours=1)
    assert rows["n1"]["last_event_ts"] == T0 + dt.timedelta(hours=2)


def test_gpu_health_counts_events_by_kind_and_xid_class(con):
    def event(kind, code=None, gpu=0, hours=1.0):
        return {
            "cluster": "sim",
            "node": "n1",
            "gpu_uuid": f"g{gpu}",
            "gpu_index": gpu,
            "ts": h(hours),
            "kind": kind,
            "code": code,
        }

    con.register(
        "gpu_events",
        table(
            "gpu_events",
            [
                event("xid", 13, hours=1),  # NONFATAL
                event("xid", 48, hours=2),  # FATAL, the last XID
                event("ecc_dbe", hours=2),
                event("thermal", 64, hours=3),
                event("power_brake", hours=4),
                event("row_remap_failure", gpu=1),
                event("xid", 79, hours=-5),  # before the window
            ],
        ),
    )
    frame = queries.run(con, "dashboard/gpu_health", **WEEK, needle="")
    cols = ["gpu_uuid", "xids", "fatal_xids", "last_xid", "ecc_dbe", "row_remap_failures"]

    assert frame.select(*cols, "throttle_events").rows() == [
        ("g0", 2, 1, 48, 1, 0, 2),
        ("g1", 0, 0, None, 0, 1, 0),
    ]
    assert queries.run(con, "dashboard/gpu_health", **WEEK, needle="g1").height == 1
    log = queries.run(con, "dashboard/gpu_event_log", **WEEK, needle="", limit=10)
    assert log.filter(log["code"] == 48).get_column("xid_severity").to_list() == ["FATAL"]


def test_fairness_jain_index_by_hand(con):
    rows = [
        make_fairness_row("a", 0.5, 0.25),  # x = 2.0
        make_fairness_row("b", 0.3, 0.25),  # x = 1.2
        make_fairness_row("c", 0.2, 0.5),  # x = 0.4
        make_fairness_row("d", 0.0, 0.0),  # no entitlement: left out
        make_fairness_row("a", 0.3, 0.25, user="alice"),  # user rows are not accounts
        make_fairness_row("a", 0.5, 0.5, week=dt.date(2026, 11, 9)),
        make_fairness_row("b", 0.5, 0.5, week=dt.date(2026, 11, 9)),
    ]
    con.register("fairness_weekly", pa.Table.from_pylist(rows, schema=FAIRNESS_SCHEMA))
    con.register("associations", table("associations", []))  # no tree: every account counts
    two_weeks = {**WEEK, "end": T0 + dt.timedelta(days=14)}
    frame = queries.run(con, "dashboard/fairness_jain_weekly", **two_weeks)

    # J = (2 + 1.2 + 0.4)² / (3 · (4 + 1.44 + 0.16)) = 12.96 / 16.8
    assert frame.rows() == [
        (dt.date(2026, 11, 2), 3, pytest.approx(12.96 / 16.8), pytest.approx(5.0)),
        (dt.date(2026, 11, 9), 2, pytest.approx(1.0), pytest.approx(1.0)),
    ]
    # a user sees their own rows and their own accounts' totals: every account's row was shown
    # to every user, and an account of one user is that user's usage and waste
    shares = queries.run(con, "dashboard/fairness_shares", **WEEK, viewer="ALICE")
    assert shares.select("account", "user").rows() == [("a", None), ("a", "alice")]
    assert shares.get_column("wait_p95_h").to_list() == [3.0] * 2
    assert queries.run(con, "dashboard/fairness_shares", **WEEK, viewer="bob").is_empty()
    assert queries.run(con, "dashboard/fairness_shares", **WEEK, viewer=None).height == 5


def test_fairness_jain_index_counts_top_level_accounts_once(con):
    # physics (75 % entitled) holds sub-account hep; an account row's shares are of its
    # subtree, so hep's use is inside physics' and counting both weighed it twice
    def assoc(account, parent, shares, at=T0, user=None):
        return {"cluster": "sim", "account": account, "user": user, "parent": parent,
                "raw_shares": shares, "source": "test", "updated_ts": at}  # fmt: skip

    tree = [
        assoc("root", None, 1),
        assoc("physics", "root", 3),
        assoc("bio", "root", 1),
        assoc("hep", "physics", 1),
        assoc("hep", None, 1, user="alice"),
        # an older snapshot where hep stood at the top: the latest tree counts
        assoc("hep", "root", 1, at=T0 - dt.timedelta(days=30)),
    ]
    rows = [
        make_fairness_row("physics", 0.5, 0.75),  # x = 2/3 (hep's use inside it)
        make_fairness_row("bio", 0.5, 0.25),  # x = 2
        make_fairness_row("hep", 0.5, 0.75),  # x = 2/3: inside physics, not counted again
    ]
    con.register("fairness_weekly", pa.Table.from_pylist(rows, schema=FAIRNESS_SCHEMA))
    con.register("associations", table("associations", tree))
    frame = queries.run(con, "dashboard/fairness_jain_weekly", **WEEK)

    # J = (2/3 + 2)² / (2 · (4/9 + 4)) = (64/9) / (80/9) = 0.8; with hep counted too, 0.696
    assert frame.rows() == [(dt.date(2026, 11, 2), 2, pytest.approx(0.8), pytest.approx(3.0))]


def test_job_gpu_timeline_means_and_unknown_fields(con):
    con.register(
        "gpu_job_buckets",
        table(
            "gpu_job_buckets",
            [
                {
                    "cluster": "sim",
                    "device": "d",
                    "job_id": "9",
                    "bucket": h(0),
                    "date": T0.date(),
                    "node": "n1",
                    "gpu_index": 3,
                    "mig_instance": 2,
                    "effective_s": 150.0,
                    "busy_known_s": 300.0,
                    "util_sum": 3000.0 * 5,
                    "util_known_s": 300.0,
                    "tensor_sum": None,
                    "tensor_known_s": 0.0,
                    "fb_used_mib_max": 2048.0,
                    "power_sum": 300.0 * 200,
                    "power_known_s": 300.0,
                }
            ],
        ),
    )
    row = queries.run(con, "dashboard/job_gpu_timeline", cluster="sim", job_id="9").row(
        0, named=True
    )

    assert row["gpu"] == "n1:3/mig2"
    assert row["busy"] == pytest.approx(0.5)
    assert row["gpu_util"] == pytest.approx(0.5)
    assert row["tensor_active"] is None
    assert row["fb_used_gib"] == pytest.approx(2.0)
    assert row["power_w"] == pytest.approx(200.0)


def test_recommendation_list_keeps_the_latest_version_savings_first(con):
    from tests.dashboard.factories import make_recommendation

    con.register(
        "recommendations",
        table(
            "recommendations",
            [
                make_recommendation("r1", gain=5.0, created_h=1),
                make_recommendation("r1", gain=50.0, created_h=9),  # the newer version wins
                make_recommendation("r2", kind="gpu_cap", gain=20.0, config="sacctmgr modify"),
                make_recommendation("r3", cluster="other", gain=99.0),
                # reserved time released to backfill: a larger figure, but not GPU-h saved
                make_recommendation("r4", kind="time_limit", gain=500.0)
                | {"evidence": '{"gain_kind": "backfill"}'},
                make_recommendation("r5", kind="drain_node", gain=1.0),  # drains first
            ],
        ),
    )
    # the view every connection of the lake has (warehouse.connection.DERIVED_VIEWS)
    con.sql(sql.load("views/recommendations_latest")).create_view("recommendations_latest")
    frame = queries.run(con, "dashboard/recommendation_list", cluster="sim", needle="")

    assert frame.select("rec_id", "expected_gain_gpu_h", "gain_kind").rows() == [
        ("r5", 1.0, "failures_avoided"),
        ("r1", 50.0, "saved"),
        ("r4", 500.0, "backfill"),
        ("r2", 20.0, "shifted"),
    ]
    found = queries.run(con, "dashboard/recommendation_list", cluster="sim", needle="sacctmgr")
    assert found.get_column("rec_id").to_list() == ["r2"]


def test_cluster_extent(con):
    con.register(
        "cluster_occupancy",
        table(
            "cluster_occupancy",
            [
                {"cluster": "b", "bucket": h(0), "gpus_total": 8.0},
                {"cluster": "a", "bucket": h(1), "gpus_total": 16.0},
                {"cluster": "a", "bucket": h(5), "gpus_total": 15.0},
            ],
        ),
    )
    # c: its scheduler's records alone (no telemetry): the span of its jobs, no GPU count
    con.register(
        "job_usage",
        table(
            "job_usage",
            [
                job("1", "alice", "vision", "COMPLETED", 1, 3, 0.0, 0.0, 0.0) | {"cluster": "a"},
                job("2", "bob", "speech", "COMPLETED", 2, 6, 0.0, 0.0, 0.0) | {"cluster": "c"},
                job("3", "bob", "speech", "RUNNING", 4, None, 0.0, 0.0, 0.0) | {"cluster": "c"},
                job("4", "bob", "speech", "PENDING", 9, None, 0.0, 0.0, 0.0)
                | {"cluster": "c", "start_ts": None},
                # d: its one record from a clock years ahead: no span the data reached (it
                # was listed with no start, and every page stopped on it)
                job("5", "dan", "x", "RUNNING", 0, None, 0.0, 0.0, 0.0)
                | {"cluster": "d", "start_ts": dt.datetime(2200, 1, 1, tzinfo=dt.UTC)},
            ],
        ),
    )
    # where open allocations end (sql/views/cluster_data_end.sql): c's records reach 7 h (a
    # later collection of running job 3), past its last start or end (6 h)
    ends = [("a", h(6).timestamp()), ("b", h(1).timestamp()), ("c", h(7).timestamp())]
    con.register("cluster_data_end", pa.table(list(zip(*ends, strict=True)), ["cluster", "end_e"]))
    frame = queries.run(con, "dashboard/cluster_extent")

    assert frame.rows() == [
        ("a", h(1), h(5), 16.0, h(6)),  # the occupancy's span, not its jobs'; data to 6 h
        ("b", h(0), h(0), 8.0, h(1)),
        ("c", h(2), h(7), None, h(7)),  # its running jobs hold GPUs to 7 h: shown up to there
    ]


@settings(max_examples=examples(60), deadline=None)
@given(text=st.text(max_size=12) | st.sampled_from(["' OR 1=1 --", "%", "_", "a'b", "\\", "ali"]))
def test_any_search_text_matches_literally_and_never_fails(text):
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        add_jobs(con)
        needle = text.strip().lower()
        fields = {
            "1": ["1", "notebook", "alice", "vision"],
            "2": ["2", "bert-ft", "bob", "speech"],
            "3": ["3", "llm", "alice", "vision"],
            "5": ["5", "serve", "carol", "speech"],
        }
        expected = {j for j, values in fields.items() if any(needle in v for v in values)}

        assert set(job_ids(con, needle=needle)) == expected


def test_window_co2e_sums_the_whole_utc_days_the_window_touches(con):
    day = T0.date()
    rows = [
        {"cluster": "sim", "date": day - dt.timedelta(days=1), "kg_co2e": 100.0, "energy_kwh": 1.0},
        {"cluster": "sim", "date": day, "kg_co2e": 2.0, "energy_kwh": 4.0, "user": "ann"},
        {"cluster": "sim", "date": day, "kg_co2e": 3.0, "energy_kwh": 6.0, "user": "bob"},
        {"cluster": "sim", "date": day + dt.timedelta(days=1), "kg_co2e": None, "energy_kwh": 5.0},
        {"cluster": "sim", "date": day + dt.timedelta(days=2), "kg_co2e": 50.0, "energy_kwh": 1.0},
        {"cluster": "other", "date": day, "kg_co2e": 70.0, "energy_kwh": 1.0},
    ]
    con.register("usage_daily", table("usage_daily", rows))
    # from T0 + 1 h to the next midnight + 2 days, excluded: the days T0 and T0 + 1 day
    window = {"cluster": "sim", "start": h(1), "end": h(48)}
    [row] = queries.run(con, "dashboard/window_co2e", **window).to_dicts()

    assert (row["first_date"], row["last_date"]) == (day, day + dt.timedelta(days=1))
    assert row["kg_co2e"] == pytest.approx(5.0)  # a day of unknown kg adds nothing, not 0 kg
    assert row["energy_kwh"] == pytest.approx(15.0)

    unknown = [r | {"kg_co2e": None} for r in rows]
    con.register("usage_daily", table("usage_daily", unknown))
    [row] = queries.run(con, "dashboard/window_co2e", **window).to_dicts()
    assert row["kg_co2e"] is None


def test_the_job_page_runs_a_running_job_to_the_end_of_the_data_and_names_its_nodes(tmp_path):
    """As `gpuledger job`: a running job whose GPUs went silent showed its run time to its
    record's last change beside GPU-hours allocated to the end of the data, and a record
    without its node list "no nodes" beside allocations on g002."""
    from tests.marts import rows as r

    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 7200, 30), node="g002", job_id="d", engine_active=0.5)
        + r.samples(range(0, 18000, 30), gpu_index=1, engine_active=0.5),
        jobs=[r.job("d", 0, None, state="RUNNING", nodes=None)],
        job_gpus=[r.job_gpu("d", 0, None, node="g002")],
        gpus=[r.gpu(node="g002"), r.gpu(gpu_index=1)],
    )
    row = queries.run(con, "dashboard/job_detail", cluster=r.CLUSTER, job_id="d", viewer=None).row(
        0, named=True
    )

    assert row["alloc_gpu_h"] == pytest.approx(5.0)
    assert row["runtime_h"] == pytest.approx(5.0)
    assert row["nodes"] == "g002"


def test_the_job_page_runs_as_gpuledger_job_without_telemetry_and_after_the_datas_end(tmp_path):
    """Scheduler records alone: the data end at the latest record time (another job's end,
    5 h in); the page said 0.17 h (its record's time) where `gpuledger job` says 5 h. A job
    that started after the samples' end (a trace's snapshot) read -1 h."""
    from tests.marts import rows as r

    def runtime_h(con, job_id: str) -> float:
        [row] = queries.run(
            con, "dashboard/job_detail", cluster=r.CLUSTER, job_id=job_id, viewer=None
        ).to_dicts()
        return row["runtime_h"]

    records = r.build_lake(
        tmp_path / "records",
        jobs=[
            r.job("run", 0, None, state="RUNNING", updated_ts=r.at(600)),
            r.job("done", 3600, 18000),
        ],
        job_gpus=[r.job_gpu("run", 0, None), r.job_gpu("done", 3600, 18000, gpu_index=1)],
    )
    assert runtime_h(records, "run") == pytest.approx(5.0)
    sampled = r.build_lake(
        tmp_path / "sampled",
        samples=r.samples(range(0, 3600, 30), engine_active=0.5),
        jobs=[r.job("late", 7200, None, state="RUNNING", updated_ts=r.at(0))],
        job_gpus=[r.job_gpu("late", 7200, None, gpu_index=1)],
    )
    assert runtime_h(sampled, "late") == 0


def test_the_gpus_by_state_chart_ends_with_the_last_bucket_the_data_covers_whole(tmp_path):
    # Two GPUs, both allocated and busy; GPU 0 sends samples to 1 h 1 min, GPU 1 to 1 h.
    # The 1 h bucket holds 1 min of one GPU's data: averaged over 5 minutes, it showed 0.2 of
    # 2 GPUs active and 1.8 "unobserved"; `gpuledger serve` already ends at 55 min.
    from tests.marts import rows as r

    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 3630, 30), engine_active=0.9)
        + r.samples(range(0, 3600, 30), gpu_index=1, engine_active=0.9),
        jobs=[r.job("a", 0, 7200, gpus=2)],
        job_gpus=[r.job_gpu("a", 0, 7200, gpu_index=i) for i in (0, 1)],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    day = dict(cluster=r.CLUSTER, start=r.at(0), end=r.at(24 * 3600))
    series = queries.run(con, "dashboard/occupancy_series", **day)

    assert series["bucket"][-1] == r.at(3300)
    assert series["active"].to_list() == pytest.approx([2.0] * 12)
    assert series["unobserved"].to_list() == pytest.approx([0.0] * 12)
    # a cluster whose data is shorter than one bucket keeps its one
    short = r.build_lake(
        tmp_path / "short",
        samples=r.samples(range(0, 120, 30), engine_active=0.9),
        jobs=[r.job("a", 0, 7200)],
        job_gpus=[r.job_gpu("a", 0, 7200)],
        gpus=[r.gpu()],
    )
    assert queries.run(short, "dashboard/occupancy_series", **day)["bucket"].to_list() == [r.at(0)]


def test_the_overview_counts_a_day_as_the_users_page_does(tmp_path):
    # Samples every 60 s at :45, so the one at 23:59:45 runs 45 s into the next day: the Overview
    # counted it whole on the first day (and the day's hours as 24.0125), so its allocated
    # GPU-hours did not add up with the Users page's observed ones (usage_daily) for the same day
    from tests.marts import rows as r

    span = range(22 * 3600 + 45, 26 * 3600, 60)
    con = r.build_lake(
        tmp_path,
        samples=r.samples(span, interval_s=60.0, engine_active=0.5)
        + r.samples(span, gpu_index=1, interval_s=60.0, engine_active=0.0),
        jobs=[r.job("a", 22 * 3600, 27 * 3600)],
        job_gpus=[r.job_gpu("a", 22 * 3600, 27 * 3600)],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    daily = dict(
        con.sql("SELECT date, sum(observed_gpu_h) FROM usage_daily GROUP BY date").fetchall()
    )
    first = r.at(0)
    for day in (0, 1):
        start = first + dt.timedelta(days=day)
        [w] = queries.run(
            con,
            "dashboard/cluster_window_summary",
            cluster=r.CLUSTER,
            start=start,
            end=start + dt.timedelta(days=1),
        ).rows(named=True)
        assert w["allocated_gpu_h"] == pytest.approx(daily[start.date()])
        # GPU 1 was nobody's: unallocated for the same span
        assert w["unallocated_gpu_h"] == pytest.approx(daily[start.date()])
        assert w["active_gpu_h"] == pytest.approx(daily[start.date()])
        assert w["effective_gpu_h"] == pytest.approx(0.5 * daily[start.date()])
        assert w["hours"] == pytest.approx(daily[start.date()])
    assert daily[first.date()] == pytest.approx(2 - 45 / 3600)  # from 22:00:45 to midnight
