"""The fairness_weekly mart on the hand-made lake of tests/report/lake.py."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.marts.rows import fetch
from tests.report.lake import fairness_lake

W9 = dt.date(2024, 2, 26)
W10 = dt.date(2024, 3, 4)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    con = fairness_lake(tmp_path_factory)
    got = fetch(con, "SELECT * FROM fairness_weekly")
    return {(r["week"], r["level"], r["account"], r["user"]): r for r in got}


def test_weeks_split_at_monday_and_every_association_gets_a_row(rows):
    assert set(rows) == {
        (week, level, account, user)
        for week in (W9, W10)
        for level, account, user in [
            ("account", "physics", None),
            ("account", "bio", None),
            ("user", "physics", "alice"),
            ("user", "physics", "carol"),
            ("user", "bio", "bob"),
        ]
    }


def test_usage_share_entitlement_and_ratio_by_hand(rows):
    physics = rows[(W9, "account", "physics", None)]
    bio = rows[(W9, "account", "bio", None)]
    # physics: j1 1 GPU-h + j3's half hour before Monday; bio: j2 2 GPUs × 0.5 h.
    assert physics["alloc_gpu_h"] == pytest.approx(1.5)
    assert bio["alloc_gpu_h"] == pytest.approx(1.0)
    assert physics["usage_share"] == pytest.approx(0.6)
    assert bio["usage_share"] == pytest.approx(0.4)
    assert physics["entitled_share"] == pytest.approx(0.75)
    assert bio["entitled_share"] == pytest.approx(0.25)
    assert physics["usage_ratio"] == pytest.approx(0.8)
    assert bio["usage_ratio"] == pytest.approx(1.6)
    alice = rows[(W9, "user", "physics", "alice")]
    assert alice["alloc_gpu_h"] == pytest.approx(1.0)
    assert alice["usage_share"] == pytest.approx(0.4)
    assert alice["level_share"] == pytest.approx(0.5)
    assert alice["entitled_share"] == pytest.approx(0.375)
    # The next week: only j3's second half hour.
    assert rows[(W10, "account", "physics", None)]["usage_share"] == pytest.approx(1.0)
    assert rows[(W10, "account", "bio", None)]["alloc_gpu_h"] == 0
    assert rows[(W10, "account", "bio", None)]["usage_ratio"] == 0


def test_waits_of_jobs_started_in_the_week(rows):
    physics = rows[(W9, "account", "physics", None)]
    # j1 waited 600 s, j3 7200 s: p50 = 3900, p95 = 600 + 0.95 × 6600 (linear interpolation).
    assert physics["jobs_started"] == 2
    assert physics["wait_p50_s"] == pytest.approx(3900)
    assert physics["wait_p95_s"] == pytest.approx(6870)
    assert rows[(W9, "account", "bio", None)]["wait_p50_s"] == pytest.approx(3600)
    assert rows[(W10, "account", "physics", None)]["wait_p50_s"] is None


def test_waste_categories_by_hand(rows):
    physics = rows[(W9, "account", "physics", None)]
    bio = rows[(W9, "account", "bio", None)]
    # j1: observed 1 h, idle the first half, effective 0.5; ended 1 h before its 2 h limit.
    assert physics["observed_gpu_h"] == pytest.approx(1.0)
    assert physics["idle_gpu_h"] == pytest.approx(0.5)
    assert physics["effective_gpu_h"] == pytest.approx(0.5)
    assert physics["waste_gpu_h"] == pytest.approx(0.5)
    assert physics["unused_limit_gpu_h"] == pytest.approx(1.0)
    assert physics["low_eff_gpu_h"] == 0
    assert physics["energy_kwh"] == pytest.approx(0.4)  # 400 W × 1 h
    # j2: failed, mean busy 0.1 < 0.25 → both its GPU-hours are failed and low-efficiency;
    # one GPU reported 0.5 h at 0.1 busy: effective 0.05, waste 0.45.
    assert bio["failed_gpu_h"] == pytest.approx(1.0)
    assert bio["low_eff_gpu_h"] == pytest.approx(1.0)
    assert bio["effective_gpu_h"] == pytest.approx(0.05)
    assert bio["waste_gpu_h"] == pytest.approx(0.45)
    assert bio["idle_gpu_h"] == 0


def test_cpu_and_memory_hours_for_dominant_share(rows):
    physics = rows[(W9, "account", "physics", None)]
    assert physics["cpu_h"] == pytest.approx(4 * 1.0 + 1 * 0.5)
    assert physics["mem_gib_h"] == pytest.approx(8.0)
    assert rows[(W9, "account", "bio", None)]["cpu_h"] == pytest.approx(2 * 0.5)


def test_without_associations_entitlement_is_null_not_guessed(tmp_path_factory):
    con = fairness_lake(tmp_path_factory, associations=False)
    got = fetch(con, "SELECT entitled_share, usage_ratio, usage_share FROM fairness_weekly")
    assert got and all(r["entitled_share"] is None and r["usage_ratio"] is None for r in got)
    assert any(r["usage_share"] for r in got)


def test_a_parent_accounts_use_is_of_its_subtree_as_its_entitlement_is(tmp_path):
    # root -> physics (3) -> {theory (1), expt (1)}; root -> bio (1). theory and bio each run
    # 1 GPU for a day: physics (no job of its own) has used half the cluster for its 0.75, as
    # its entitlement counts its sub-accounts; it said 0 % used against 75 % entitled
    from tests.marts import rows as r
    from tests.report.lake import assoc

    day = 3 * 86400.0  # Monday 2024-03-04
    r.land(
        tmp_path,
        "associations",
        [
            assoc("root", None, None, None),
            assoc("physics", None, "root", 3),
            assoc("theory", None, "physics", 1),
            assoc("expt", None, "physics", 1),
            assoc("bio", None, "root", 1),
        ],
    )
    con = r.build_lake(
        tmp_path,
        jobs=[
            r.job("j1", day, day + 86400, account="theory"),
            r.job("j2", day, day + 86400, user="bob", account="bio"),
        ],
        job_gpus=[
            r.job_gpu("j1", day, day + 86400),
            r.job_gpu("j2", day, day + 86400, gpu_index=1),
        ],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    got = {
        row["account"]: row
        for row in fetch(con, "SELECT * FROM fairness_weekly WHERE level = 'account'")
        if row["week"] == W10
    }

    assert got["physics"]["alloc_gpu_h"] == 0  # its own: the accounts' GPU-hours add up
    assert sum(row["alloc_gpu_h"] for row in got.values()) == pytest.approx(48.0)
    assert got["physics"]["usage_share"] == pytest.approx(0.5)
    assert got["physics"]["usage_ratio"] == pytest.approx(0.5 / 0.75)
    assert got["theory"]["usage_share"] == pytest.approx(0.5)
    assert got["theory"]["entitled_share"] == pytest.approx(0.375)
    assert got["expt"]["usage_share"] == 0
    assert got["bio"]["usage_ratio"] == pytest.approx(2.0)


def test_an_unused_limit_counts_no_more_gpus_than_the_cluster_has(tmp_path):
    """A record claiming 100,000 GPUs on a 2-GPU cluster: its allocation is capped at the
    inventory, its unused limit was not (100,000 GPU-hours unused in a week of 2 GPUs)."""
    from tests.marts import rows as r

    day = 3 * 86400.0  # Monday 2024-03-04
    con = r.build_lake(
        tmp_path,
        jobs=[r.job("huge", day, day + 3600, gpus=100_000, time_limit_s=7200)],
        gpus=[r.gpu(), r.gpu(gpu_index=1)],
    )
    [row] = fetch(
        con,
        "SELECT alloc_gpu_h, unused_limit_gpu_h FROM fairness_weekly "
        "WHERE level = 'account' AND account = 'physics'",
    )

    assert row["alloc_gpu_h"] == pytest.approx(2.0)  # 2 GPUs for its hour
    assert row["unused_limit_gpu_h"] == pytest.approx(2.0)  # 2 GPUs for the hour it left
