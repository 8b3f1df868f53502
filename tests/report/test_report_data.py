"""Every number of the weekly report, on the hand-made lake of tests/report/lake.py."""

from __future__ import annotations

import datetime as dt
import math

import polars as pl
import pytest

from app.report.data import ReportSettings, _nested, _scalars, assemble_report
from app.report.fairshare import Association
from app.report.mail import _summary
from app.report.week import IsoWeek
from tests.marts.rows import T0, T0_E, fetch
from tests.report.lake import HOUR, WEEK_END_S, fairness_lake

WEEK = IsoWeek(2024, 9)
NOW = T0 + dt.timedelta(days=10)
HALF_LIFE_S = 7 * 86400.0


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    return fairness_lake(tmp_path_factory)


@pytest.fixture(scope="module")
def report(con):
    settings = ReportSettings(cost_per_gpu_h=2.0, cost_per_kwh=0.5)
    return assemble_report(con, "della", WEEK, settings, NOW)


def rows(frame: pl.DataFrame, key: str) -> dict:
    return {r[key]: r for r in frame.iter_rows(named=True)}


def decayed(spans: list[tuple[float, float, int]], as_of: float, steps: int = 20000) -> float:
    """GPU-hours weighted by 2^(-age/half-life), by midpoint integration (not the closed form)."""
    total = 0.0
    for start, end, gpus in spans:
        width = (end - start) / steps
        for k in range(steps):
            t = start + (k + 0.5) * width
            total += gpus * width * 2 ** (-(as_of - t) / HALF_LIFE_S)
    return total / 3600


def test_week_bounds():
    assert WEEK.start.timestamp() == pytest.approx(T0_E - 4 * 86400)
    assert WEEK.end.timestamp() == pytest.approx(T0_E + WEEK_END_S)


def test_decayed_usage_share_matches_numeric_integration(report):
    accounts = rows(report.tables["accounts"], "account")
    # As of the week's end (the report is for a past week).
    physics = decayed([(0, HOUR, 1), (WEEK_END_S - 1800, WEEK_END_S, 1)], WEEK_END_S)
    bio = decayed([(0, HOUR / 2, 2)], WEEK_END_S)
    assert accounts["physics"]["decayed_usage_share"] == pytest.approx(
        physics / (physics + bio), rel=1e-6
    )
    assert accounts["bio"]["decayed_usage_share"] == pytest.approx(bio / (physics + bio), rel=1e-6)


def test_usage_vs_entitlement_and_slurm_factors(report):
    accounts = rows(report.tables["accounts"], "account")
    physics, bio = accounts["physics"], accounts["bio"]
    assert report.share_source.startswith("Slurm associations")
    assert physics["usage_share"] == pytest.approx(0.6)
    assert physics["entitled_share"] == pytest.approx(0.75)
    assert physics["usage_ratio"] == pytest.approx(0.8)
    assert bio["usage_ratio"] == pytest.approx(1.6)
    u_phys = physics["decayed_usage_share"]
    assert physics["classic_factor"] == pytest.approx(2 ** (-u_phys / 0.75))
    assert physics["level_fs"] == pytest.approx(0.75 / u_phys)
    users = {(r["account"], r["user"]): r for r in report.tables["users"].iter_rows(named=True)}
    # Users: alice's decayed usage is all of physics' before Monday minus carol's half hour;
    # carol's share of physics' usage is smaller, so carol ranks above alice; bob (bio is
    # over-served: level FS < 1) ranks last of the three.
    assert users[("physics", "carol")]["fair_tree_factor"] == pytest.approx(1.0)
    assert users[("physics", "alice")]["fair_tree_factor"] == pytest.approx(2 / 3)
    assert users[("bio", "bob")]["fair_tree_factor"] == pytest.approx(1 / 3)


def test_fairness_scalars_over_accounts_with_demand(report):
    s = report.scalars
    # Both accounts queued this week (physics 2.2 h of waiting, bio 49 h). Ratios 0.8 and 1.6:
    # Jain = 2.4² / (2 × (0.64 + 2.56)) = 0.9; max/min = 2.
    assert s["accounts_with_demand"] == s["jain_accounts"] == 2
    assert s["jain_index"] == pytest.approx(0.9)
    assert s["max_min_ratio"] == pytest.approx(2.0)
    # physics holds all the memory-hours requested: dominant share 1.0.
    assert s["dominant_share_max"] == pytest.approx(1.0)
    assert s["dominant_share_account"] == "physics"
    demand = rows(report.tables["accounts"], "account")
    assert demand["bio"]["pending_job_h"] == pytest.approx(1 + 48)
    assert demand["physics"]["pending_job_h"] == pytest.approx((600 + 7200) / 3600)
    assert demand["physics"]["dominant_share"] == pytest.approx(1.0)
    assert demand["bio"]["dominant_share"] == pytest.approx(0.4)


def test_waits_by_size_backlog_and_starvation(report):
    waits = {(r["account"], r["size_class"]): r for r in report.tables["waits_by_size"].to_dicts()}
    assert waits[("(all)", "1 GPU")]["jobs"] == 2
    assert waits[("(all)", "1 GPU")]["wait_p50_s"] == pytest.approx(3900)
    assert waits[("(all)", "1 GPU")]["wait_p95_s"] == pytest.approx(6870)
    assert waits[("bio", "2-8 GPUs")]["wait_p95_s"] == pytest.approx(3600)
    assert all(w["over_24h"] == 0 for w in waits.values())
    [backlog] = report.tables["pending_backlog"].to_dicts()
    assert backlog["account"] == "bio"
    assert backlog["jobs_pending"] == 1
    assert backlog["gpus_pending"] == 4
    assert backlog["backlog_gpu_h"] == pytest.approx(40.0)
    assert backlog["waiting_over_24h"] == 1
    assert backlog["oldest_wait_h"] == pytest.approx(48.0)
    assert report.scalars["jobs_pending_at_end"] == 1


def test_waste_costs_and_trend(report):
    waste = rows(report.tables["waste_by_account"], "account")
    assert waste["physics"]["waste_gpu_h"] == pytest.approx(0.5)
    assert waste["physics"]["waste_cost"] == pytest.approx(1.0)  # 0.5 GPU-h × $2
    assert waste["physics"]["energy_cost"] == pytest.approx(0.2)  # 0.4 kWh × $0.5
    # W09 is the lake's first week with data: the weeks before it are unknown, not zero.
    assert waste["physics"]["waste_prev_gpu_h"] is None
    assert waste["physics"]["waste_change_gpu_h"] is None
    assert waste["physics"]["waste_4wk_mean_gpu_h"] == pytest.approx(0.5)  # over W09 alone
    assert waste["physics"]["waste_mean_weeks"] == 1
    assert report.scalars["trend_weeks_with_data"] == 1
    assert report.scalars["previous_week_has_data"] is False
    assert waste["bio"]["waste_gpu_h"] == pytest.approx(0.45)
    trend = report.tables["waste_trend"]
    assert trend.get_column("week").to_list() == [WEEK.minus(k).monday for k in (3, 2, 1, 0)]
    assert trend.get_column("has_data").to_list() == [False, False, False, True]
    assert trend.get_column("waste_gpu_h").to_list() == [None, None, None, pytest.approx(0.95)]
    assert trend.get_column("failed_gpu_h").to_list() == [None, None, None, pytest.approx(1.0)]
    assert report.scalars["waste_gpu_h"] == pytest.approx(0.95)
    top = report.tables["waste_by_user"].get_column("user").to_list()
    assert top == ["alice", "bob", "carol"]  # by waste; carol's job had no telemetry: 0


def test_resilience_power_frame_and_actions(report):
    [failure] = report.tables["failures_by_cause"].to_dicts()
    assert failure == {
        "account": "bio",
        "outcome": "failed",
        "cause": "application",
        "jobs": 1,
        "gpu_h_lost": pytest.approx(1.0),
    }
    power = {(r["source"], r["name"]): r for r in report.tables["power_findings"].to_dicts()}
    assert set(power) == {("finding", "power_cap_candidate"), ("recommendation", "power_cap")}
    found = power[("finding", "power_cap_candidate")]
    assert found["entries"] == 2 and found["gpu_h_at_stake"] == pytest.approx(4.0)
    assert found["kwh_saved"] == pytest.approx(2.5)  # the malformed evidence counts no kWh
    assert power[("recommendation", "power_cap")]["kwh_saved"] == pytest.approx(40.0)
    [trained] = report.tables["training_throughput"].to_dicts()
    assert (trained["job_id"], trained["gpus"], trained["model_params"]) == ("j1", 1, 10**9)
    assert trained["tokens_per_s_per_gpu"] == pytest.approx(1000.0)
    assert trained["mfu"] == pytest.approx(6 * 1e9 * 1000 / 989e12)
    energy = rows(report.tables["energy_by_account"], "account")
    assert energy["physics"]["energy_kwh"] == pytest.approx(0.4)
    [frame] = report.tables["cluster_frame"].to_dicts()
    # 3 GPUs over the hour of telemetry: j1's GPU observed 1 h (half idle), j2's reporting GPU
    # 0.5 h (busy 0.1: active); nothing unallocated; the rest unobserved.
    assert frame["reported_gpu_h"] == pytest.approx(3.0)
    assert frame["allocated_gpu_h"] == pytest.approx(1.5)
    assert frame["active_gpu_h"] == pytest.approx(1.0)
    assert frame["idle_allocated_gpu_h"] == pytest.approx(0.5)
    assert frame["planned_gpu_h"] == 0 and frame["idle_gpu_h"] == 0
    assert frame["unobserved_gpu_h"] == pytest.approx(1.5)
    actions = report.tables["recommendations"].to_dicts()
    # r4 was made a month later but its evidence covers W09; r1 and r3 (no evidence window)
    # were made in W09; r2 was made the week after, r5's evidence starts after W09. GPU-hours
    # saved (r1's idle-cancel policy) come before r4's larger gain, GPU-hours a cap shifts to
    # others (what each gain counts follows from the kind: these rows predate gain_kind).
    assert [a["rec_id"] for a in actions] == ["r1", "r4", "r3"]
    assert [a["gain_kind"] for a in actions] == ["saved", "shifted", None]
    assert actions[0]["expected_gain_gpu_h"] == 12.5


def test_a_week_without_data_is_a_report_that_says_so(con):
    # Weeks before any job (after the last one, j4 would still be queued: that is demand).
    empty = assemble_report(con, "della", IsoWeek(2024, 2), ReportSettings(), NOW)
    assert not empty.has_data
    assert empty.scalars["jain_index"] is None
    assert empty.tables["waste_by_account"].is_empty()
    assert empty.scalars["alloc_gpu_h"] == 0


@pytest.mark.parametrize("week", [IsoWeek(2024, 8), IsoWeek(2024, 11)])
def test_a_week_with_jobs_only_queued_is_not_a_week_with_data(con, week):
    # W08 holds j2's and j3's submits before any GPU ran; W11 j4 still queued after the data
    # end: no GPU-hours allocated or observed, so not a data week (docs/report.md,
    # report/data_weeks)
    report = assemble_report(con, "della", week, ReportSettings(), NOW)
    assert not report.has_data
    assert report.data_weeks.span == "2024-W09 to 2024-W10"
    assert report.scalars["pending_job_h"] == 0  # (W11's queue lies past the data end)
    assert "Yet jobs waited" not in _summary(report)


def test_a_week_no_job_ran_in_but_one_waited_says_so(tmp_path):
    # the GPU reports all through 2024-W10 but no job runs: bob's job waits the whole week.
    # Not a week with data, but its queue is said, never denied ("no … queue records")
    from tests.marts import rows as r

    monday = 3 * 86400.0  # T0 + 3 d: Monday 2024-03-04
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, int(monday + 7 * 86400), 3600), interval_s=3600.0),
        jobs=[
            r.job("j1", 0, 86400),
            r.job("j2", monday, None, user="bob", account="bio", state="PENDING")
            | {"start_ts": None, "updated_ts": r.at(monday + 7 * 86400)},
        ],
        job_gpus=[r.job_gpu("j1", 0, 86400)],
        gpus=[r.gpu()],
    )

    report = assemble_report(con, "della", IsoWeek(2024, 10), ReportSettings(), NOW)

    assert not report.has_data
    assert report.scalars["pending_job_h"] == pytest.approx(7 * 24)
    assert "Yet jobs waited in the queue: 168 job-hours" in _summary(report)


def test_shares_from_the_command_line_beside_the_lakes_associations_are_said_unused(con):
    settings = ReportSettings(shares={"physics": 100})
    report = assemble_report(con, "della", WEEK, settings, NOW)

    assert report.share_source.startswith("Slurm associations")
    assert any("--share are not used" in note for note in report.notes)


def test_shares_from_the_command_line_when_the_lake_has_none(tmp_path_factory):
    con = fairness_lake(tmp_path_factory, associations=False)
    settings = ReportSettings(shares={"physics": 1, "bio": 1})
    report = assemble_report(con, "della", WEEK, settings, NOW)
    accounts = rows(report.tables["accounts"], "account")
    assert report.share_source == "shares given with --share"
    assert accounts["physics"]["entitled_share"] == pytest.approx(0.5)
    assert accounts["physics"]["usage_ratio"] == pytest.approx(1.2)
    equal = assemble_report(con, "della", WEEK, ReportSettings(), NOW)
    assert equal.share_source.startswith("equal shares")
    assert any("equal share" in n for n in equal.notes)
    assert not math.isnan(rows(equal.tables["accounts"], "account")["bio"]["usage_ratio"])


def test_an_account_without_a_share_has_no_usage_ratio_and_a_headline_of_its_own(
    tmp_path_factory,
):
    # bio is given no share: 0 ÷ 0 was NaN, which passes "> 2" in polars ("used nan× its share")
    con = fairness_lake(tmp_path_factory, associations=False)
    report = assemble_report(con, "della", WEEK, ReportSettings(shares={"physics": 1}), NOW)
    bio = rows(report.tables["accounts"], "account")["bio"]

    assert bio["entitled_share"] == 0 and bio["usage_ratio"] is None
    assert not any("nan" in line for line in report.headlines)
    assert any(line.startswith("bio used") and "with no share" in line for line in report.headlines)


def test_the_week_after_compares_with_the_first_and_averages_two_weeks(con):
    # W10 holds carol's last half hour, which no telemetry covers: its waste is unknown, not
    # 0 (it read "0.0 wasted, -0.5 on last week"); W09 is known and had 0.5.
    later = assemble_report(con, "della", IsoWeek(2024, 10), ReportSettings(), NOW)
    waste = rows(later.tables["waste_by_account"], "account")
    assert waste["physics"]["waste_prev_gpu_h"] == pytest.approx(0.5)
    assert waste["physics"]["waste_gpu_h"] is None
    assert waste["physics"]["waste_change_gpu_h"] is None
    assert waste["physics"]["waste_4wk_mean_gpu_h"] is None
    assert waste["physics"]["waste_mean_weeks"] == 1  # W09's: W10's waste is unknown
    assert later.scalars["previous_week_has_data"] is True
    assert later.scalars["telemetry"] is False
    trend = later.tables["waste_trend"]
    assert trend.get_column("has_data").to_list() == [False, False, True, True]
    assert trend.get_column("waste_gpu_h").to_list() == [None, None, pytest.approx(0.95), None]


def test_the_weeks_with_data_and_where_the_data_end(con):
    from app.report.data import data_weeks

    weeks = data_weeks(con, ["della"])
    assert [w.label for w in weeks.weeks] == ["2024-W09", "2024-W10"]
    assert weeks.span == "2024-W09 to 2024-W10"
    # j3 ends half an hour into W10, the latest record of the lake.
    assert weeks.data_end == T0 + dt.timedelta(seconds=WEEK_END_S + 1800)
    assert data_weeks(con, ["nowhere"]).weeks == []
    assert data_weeks(con, ["nowhere"]).span == "none"


def test_recommendations_stored_but_none_for_the_week(con):
    # W02: no recommendation's evidence covers it, but five are stored.
    empty = assemble_report(con, "della", IsoWeek(2024, 2), ReportSettings(), NOW)
    assert empty.tables["recommendations"].is_empty()
    assert empty.scalars["recommendations_stored"] == 5
    assert empty.scalars["recommendations_made_last"] == T0 + dt.timedelta(days=30)


def test_no_recommendations_stored_means_detect_has_not_run(tmp_path_factory):
    con = fairness_lake(tmp_path_factory, recommendations=False)
    report = assemble_report(con, "della", WEEK, ReportSettings(), NOW)
    assert report.tables["recommendations"].is_empty()
    assert report.scalars["recommendations_stored"] == 0
    assert report.scalars["recommendations_made_last"] is None


def test_a_week_the_data_end_inside_has_its_queue_as_it_stood_then(tmp_path):
    # the data end Tuesday 00:00 of 2024-W10; bob's job was queued 2 h before: at the end of
    # the data it had waited 2 h, not the 146 h to the week's end no record saw (it was "waiting
    # more than 24 h" and bio "queued 146 job-hours"), and the report says the week is cut
    from tests.marts import rows as r

    monday = 3 * 86400.0  # T0 + 3 d: Monday 2024-03-04
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(int(monday), int(monday + 86400), 600), interval_s=600.0),
        jobs=[
            r.job("j1", monday, monday + 86400, time_limit_s=2 * 86400),
            r.job(
                "j2",
                monday + 22 * 3600,
                None,
                user="bob",
                account="bio",
                state="PENDING",
                gpus_requested=4,
                time_limit_s=36000,
            )
            | {"start_ts": None},
        ],
        job_gpus=[r.job_gpu("j1", monday, monday + 86400)],
        gpus=[r.gpu()],
    )
    week = IsoWeek(2024, 10)

    report = assemble_report(con, "della", week, ReportSettings(), NOW)

    [backlog] = report.tables["pending_backlog"].to_dicts()
    assert backlog["oldest_wait_h"] == pytest.approx(2.0)
    assert backlog["waiting_over_24h"] == 0
    assert not any("more than 24 h" in line for line in report.headlines)
    assert any("inside this week: its figures cover 24 of its 168 hours" in n for n in report.notes)


def test_jain_compares_top_level_accounts_once():
    # physics holds sub-account hep: an account row's use and share are of its subtree, so
    # hep's are inside physics' and counting both weighed them twice
    nodes = [
        Association("physics", None, "root", 3, 0.0),
        Association("bio", None, "root", 1, 0.0),
        Association("hep", None, "physics", 1, 0.0),
        Association("hep", "alice", "hep", 1, 0.0),
        Association("stray", None, None, 0, 0.0),  # used GPUs without an association
    ]
    assert _nested(nodes) == {"hep"}
    accounts = pl.DataFrame(
        {
            "account": ["physics", "bio", "hep"],
            "had_demand": [True, True, True],
            "entitled_share": [0.75, 0.25, 0.75],
            "usage_ratio": [2 / 3, 2.0, 2 / 3],
            "pending_job_h": [1.0, 1.0, 1.0],
            "dominant_share": [0.5, 0.5, 0.5],
        }
    )
    s = _scalars(accounts, _nested(nodes))
    # J = (2/3 + 2)² / (2 · (4/9 + 4)) = 0.8 (0.758 with hep counted again); max/min = 3
    assert s["jain_accounts"] == 2 and s["accounts_with_demand"] == 3
    assert s["jain_index"] == pytest.approx(0.8)
    assert s["max_min_ratio"] == pytest.approx(3.0)


def test_a_week_without_gpu_telemetry_says_its_waste_is_unknown_not_zero(tmp_path):
    """The scheduler's records alone (no exporter yet): the page said "0.0 % of them doing
    work" and "0.0 GPU-hours wasted", and ranked users by zeros."""
    from app.report.html import render_html
    from tests.marts import rows as r

    con = r.build_lake(
        tmp_path,
        jobs=[r.job("a", 0, 4 * HOUR, gpus=2), r.job("b", HOUR, 2 * HOUR, user="bob")],
        job_gpus=[
            r.job_gpu("a", 0, 4 * HOUR),
            r.job_gpu("a", 0, 4 * HOUR, gpu_index=1),
            r.job_gpu("b", HOUR, 2 * HOUR, gpu_index=2),
        ],
    )
    report = assemble_report(con, "della", WEEK, ReportSettings(cost_per_gpu_h=2.0), NOW)

    s = report.scalars
    assert s["alloc_gpu_h"] == pytest.approx(9.0)  # the scheduler's: known
    assert not s["telemetry"]
    assert s["effective_gpu_h"] is None and s["waste_gpu_h"] is None
    waste = report.tables["waste_by_account"].row(0, named=True)
    assert waste["alloc_gpu_h"] == pytest.approx(9.0)
    assert waste["idle_gpu_h"] is None and waste["waste_gpu_h"] is None
    assert any("No GPU telemetry covers this week's jobs" in n for n in report.notes)
    assert "GPU-hours wasted: unknown (no GPU telemetry)" in _summary(report)
    page = render_html(report, {})
    assert "unknown, no GPU telemetry" in page and "users by waste" not in page


def test_energy_no_sample_carried_is_unknown_in_the_headline_and_the_trend(tmp_path):
    # review: samples without power or an energy counter made the week's energy and its trend
    # row 0.0 kWh (the marts say unknown)
    from app.report.html import render_html
    from tests.marts import rows as r

    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 4 * int(HOUR), 30), engine_active=0.5),
        jobs=[r.job("a", 0, 4 * HOUR)],
        job_gpus=[r.job_gpu("a", 0, 4 * HOUR)],
    )
    report = assemble_report(con, "della", WEEK, ReportSettings(), NOW)

    assert report.scalars["telemetry"] and report.scalars["energy_kwh"] is None
    [this_week] = report.tables["waste_trend"].filter(pl.col("has_data")).rows(named=True)
    assert this_week["energy_kwh"] is None and this_week["observed_gpu_h"] > 0
    render_html(report, {})  # (renders: unknown, not a format error)


def test_a_week_after_one_without_telemetry_has_no_change_on_it(tmp_path):
    """W09 held GPUs that no telemetry covered; W10 is observed. W09's waste is unknown: it
    was taken as 0, and W10 read "+X on last week" and a mean over both."""
    from tests.marts import rows as r

    monday = 3 * 86400.0  # W10 starts 3 days after T0 (Friday)
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(int(monday), int(monday + 2 * HOUR), 60), engine_active=0.0),
        jobs=[r.job("w09", 0, 4 * HOUR), r.job("w10", monday, monday + 2 * HOUR)],
        job_gpus=[
            r.job_gpu("w09", 0, 4 * HOUR, gpu_index=3),
            r.job_gpu("w10", monday, monday + 2 * HOUR),
        ],
    )
    report = assemble_report(con, "della", IsoWeek(2024, 10), ReportSettings(), NOW)

    [row] = report.tables["waste_by_account"].to_dicts()
    assert row["waste_gpu_h"] > 0 and report.scalars["telemetry"]
    assert row["waste_prev_gpu_h"] is None and row["waste_change_gpu_h"] is None
    assert row["waste_mean_weeks"] == 1
    assert row["waste_4wk_mean_gpu_h"] == pytest.approx(row["waste_gpu_h"])


def test_cpu_jobs_are_no_gpu_demand(tmp_path):
    # `collect slurm` lands every job of a cluster, CPU jobs (gpus 0) too: the probe's CPU-only
    # account "got 0.0× its share while its jobs queued 150 job-hours" (Jain 0.5 over two
    # accounts), its 30 h wait was the "1 GPU" p95, and the GPUs idle while it queued were
    # "planned". Only jobs that asked for GPUs wait for one.
    from tests.marts import rows as r

    monday = 3 * 86400.0  # T0 + 3 d: Monday 2024-03-04
    cpu = {"user": "carl", "account": "cpu", "gpus": 0, "gpus_requested": 0, "cpus": 32}
    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(int(monday), int(monday + 2 * 86400), 3600), interval_s=3600.0),
        jobs=[
            r.job("g1", monday + 7200, monday + 86400) | {"submit_ts": r.at(monday + 3600)},
            r.job("c1", monday + 30 * 3600, monday + 40 * 3600, **cpu)
            | {"submit_ts": r.at(monday)},
            r.job("c2", monday, None, **cpu, state="PENDING", time_limit_s=3600)
            | {"start_ts": None, "updated_ts": r.at(monday + 2 * 86400)},
        ],
        job_gpus=[r.job_gpu("g1", monday + 7200, monday + 86400)],
        gpus=[r.gpu()],
    )

    report = assemble_report(con, "della", IsoWeek(2024, 10), ReportSettings(), NOW)

    accounts = rows(report.tables["accounts"], "account")
    assert "cpu" not in accounts or not accounts["cpu"]["pending_job_h"]
    assert report.scalars["accounts_with_demand"] == 1
    assert report.scalars["pending_job_h"] == pytest.approx(1.0)  # g1's hour in the queue
    waits = {(w["account"], w["size_class"]): w for w in report.tables["waits_by_size"].to_dicts()}
    assert set(waits) == {("physics", "1 GPU"), ("(all)", "1 GPU")}
    assert waits[("(all)", "1 GPU")]["jobs"] == 1  # g1
    assert waits[("(all)", "1 GPU")]["wait_max_s"] == pytest.approx(3600)
    assert report.tables["pending_backlog"].is_empty()
    [frame] = report.tables["cluster_frame"].to_dicts()
    assert frame["planned_gpu_h"] == pytest.approx(1.0)  # the GPU was free while g1 waited
    weekly = fetch(con, "SELECT * FROM fairness_weekly WHERE account = 'cpu'")
    assert all(not w["jobs_started"] and w["wait_p95_s"] is None for w in weekly)
    # its CPU-hours still count (the dominant share): c1's 32 CPUs × 10 h (review)
    [cpu_week] = [w for w in weekly if w["level"] == "account" and w["cpu_h"]]
    assert cpu_week["cpu_h"] == pytest.approx(320.0)


def test_the_queue_is_said_as_of_where_it_was_taken(con, report):
    # W10's data end half an hour in: its queue is the one at the end of the data, and the
    # card said "at week end"
    assert report.scalars["queue_at"] == "week end"
    inside = assemble_report(con, "della", IsoWeek(2024, 10), ReportSettings(), NOW)
    assert inside.scalars["queue_at"] == "the end of the data"
    assert "Jobs queued at the end of the data:" in _summary(inside)  # the mail's text too


def test_no_longest_waits_where_nobody_waited(tmp_path):
    # "Longest waits: 1 GPU jobs, p95 0.0 h" said nothing
    from tests.marts import rows as r

    con = r.build_lake(
        tmp_path,
        samples=r.samples(range(0, 7200, 600), interval_s=600.0),
        jobs=[r.job("j1", 0, 3600)],
        job_gpus=[r.job_gpu("j1", 0, 3600)],
        gpus=[r.gpu()],
    )
    report = assemble_report(con, "della", IsoWeek(2024, 9), ReportSettings(), NOW)
    assert report.has_data
    assert not any(line.startswith("Longest waits") for line in report.headlines)


def test_a_user_whose_jobs_no_sample_saw_has_unknown_telemetry_figures(report):
    # carol's j3 ran on g002/0, which never reported, beside alice's measured j1: her row read
    # "effective 0.0, waste 0.0" (the probe: a whole account on a silent node, 54 GPU-h)
    users = {(u["account"], u["user"]): u for u in report.tables["users"].to_dicts()}
    carol, alice = users[("physics", "carol")], users[("physics", "alice")]
    assert carol["alloc_gpu_h"] == pytest.approx(0.5) and carol["observed_gpu_h"] == 0
    assert carol["effective_gpu_h"] is None
    assert alice["effective_gpu_h"] == pytest.approx(0.5)
    waste = {(w["account"], w["user"]): w for w in report.tables["waste_by_user"].to_dicts()}
    assert waste[("physics", "carol")]["waste_gpu_h"] is None
    assert waste[("physics", "alice")]["waste_gpu_h"] == pytest.approx(0.5)
    # measured rows first, the unknown last
    assert list(waste)[-1] == ("physics", "carol")
