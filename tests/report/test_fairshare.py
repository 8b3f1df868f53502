"""Slurm's fair-share arithmetic and the fairness scalars, against values worked out by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.report.fairshare import Association, fair_tree, jain_index, max_min_ratio


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, 1.0, 1.0, 1.0], 1.0),  # equal
        ([1.0, 0.0, 0.0, 0.0], 0.25),  # one has all: 1/n
        ([1.0, 1.0, 0.0, 0.0], 0.5),  # k of n equal, rest nothing: k/n
        ([2.0, 1.0], 0.9),  # (3)^2 / (2 × 5)
        ([], None),
        ([0.0, 0.0], None),
    ],
)
def test_jain_index_matches_hand_values(values, expected):
    assert jain_index(values) == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([0.5, 2.0, 1.0], 4.0), ([1.0, 0.0], math.inf), ([], None), ([0.0], None)],
)
def test_max_min_ratio(values, expected):
    assert max_min_ratio(values) == expected


# Usage figures are 0 or at least a micro-GPU-hour: values near the smallest float would round
# to 0 when scaled (5e-324 × 0.5 == 0), which is float arithmetic, not the index.
USAGE = st.one_of(st.just(0.0), st.floats(1e-6, 1e6, allow_nan=False))


@given(st.lists(USAGE, min_size=1, max_size=30), st.floats(0.01, 100))
def test_jain_index_is_between_1_over_n_and_1_and_scale_free(values, scale):
    j = jain_index(values)
    if j is None:
        assert all(v == 0 for v in values)
        return
    assert 1 / len(values) - 1e-9 <= j <= 1 + 1e-9
    scaled = jain_index([v * scale for v in values])
    assert scaled == pytest.approx(j, rel=1e-6)


# Root's children: account A (60 shares), account B (40), and the root user (1), as in the
# test Slurm; A has users a1 (3 GPU-h) and a2 (1), B has b1 (4). Total usage 8.
TREE = [
    Association("root", "root", None, 1, 0.0),
    Association("A", None, "root", 60, 0.0),
    Association("A", "a1", None, 1, 3.0),
    Association("A", "a2", None, 1, 1.0),
    Association("B", None, "root", 40, 0.0),
    Association("B", "b1", None, 1, 4.0),
]


def by_key(results):
    return {(r.account, r.user): r for r in results}


def test_fair_tree_level_fair_share_and_rank_by_hand():
    r = by_key(fair_tree(TREE))

    # Level shares among siblings; usage normalised to the parent's.
    assert r[("A", None)].norm_shares == pytest.approx(60 / 101)
    assert r[("root", "root")].norm_shares == pytest.approx(1 / 101)
    assert r[("A", None)].effective_usage == pytest.approx(0.5)
    assert r[("A", "a1")].effective_usage == pytest.approx(0.75)
    assert r[("A", None)].level_fs == pytest.approx((60 / 101) / 0.5)
    assert r[("B", None)].level_fs == pytest.approx((40 / 101) / 0.5)
    assert r[("root", "root")].level_fs == math.inf
    assert r[("A", "a2")].level_fs == pytest.approx(0.5 / 0.25)
    # NormUsage is global.
    assert r[("A", None)].norm_usage == pytest.approx(0.5)
    assert r[("B", "b1")].norm_usage == pytest.approx(0.5)
    # Ranking, depth first by level FS: root user (inf), then A (1.19 > B's 0.79): a2 (2.0)
    # before a1 (0.67), then b1. Four users: 4/4, 3/4, 2/4, 1/4.
    assert r[("root", "root")].fair_tree_factor == 1.0
    assert r[("A", "a2")].fair_tree_factor == 0.75
    assert r[("A", "a1")].fair_tree_factor == 0.5
    assert r[("B", "b1")].fair_tree_factor == 0.25
    assert r[("A", None)].fair_tree_factor is None  # accounts have no Fair Tree factor


def test_classic_factor_uses_effective_usage_down_the_tree():
    r = by_key(fair_tree(TREE))
    s_a = 60 / 101

    assert r[("A", None)].entitled_share == pytest.approx(s_a)
    assert r[("A", None)].classic_factor == pytest.approx(2 ** (-0.5 / s_a))
    # a1: U = 3/8, U_E = U + (U_E,A − U) × S_level = 0.375 + (0.5 − 0.375) × 0.5 = 0.4375,
    # S = S_A × 0.5.
    assert r[("A", "a1")].entitled_share == pytest.approx(s_a * 0.5)
    assert r[("A", "a1")].classic_factor == pytest.approx(2 ** (-0.4375 / (s_a * 0.5)))


def test_users_without_usage_tie_on_the_same_rank():
    tree = [
        Association("A", None, None, 1, 0.0),
        Association("A", "x", None, 1, 0.0),
        Association("A", "y", None, 1, 0.0),
        Association("A", "z", None, 1, 5.0),
    ]
    r = by_key(fair_tree(tree))

    assert r[("A", "x")].fair_tree_factor == r[("A", "y")].fair_tree_factor == 1.0
    assert r[("A", "z")].fair_tree_factor == pytest.approx(1 / 3)


def test_an_association_without_shares_has_level_fs_zero_and_factor_zero():
    tree = [Association("A", None, None, 0, 0.0), Association("B", None, None, 1, 0.0)]
    tree += [Association("A", "u", None, 1, 1.0), Association("B", "v", None, 1, 1.0)]
    r = by_key(fair_tree(tree))

    assert r[("A", None)].level_fs == 0.0
    assert r[("A", None)].classic_factor == 0.0
    assert r[("B", "v")].fair_tree_factor == 1.0
    assert r[("A", "u")].fair_tree_factor == 0.5


usage = st.floats(0, 1000, allow_nan=False)


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 50), usage), min_size=1, max_size=12))
def test_fair_tree_factors_are_ranks_and_follow_level_fair_share(users):
    tree = [Association(f"acct{a}", None, None, 10 * a, 0.0) for a in (1, 2, 3)]
    tree += [
        Association(f"acct{a}", f"user{i}", None, shares, u)
        for i, (a, shares, u) in enumerate(users)
    ]
    results = fair_tree(tree)
    factors = [r.fair_tree_factor for r in results if r.user is not None]

    assert max(factors) == 1.0
    assert all(0 < f <= 1 for f in factors)
    # Within one account, a user with a higher level FS never ranks below one with a lower.
    for a in results:
        for b in results:
            if a.user and b.user and a.account == b.account and a.level_fs > b.level_fs:
                assert a.fair_tree_factor >= b.fair_tree_factor
    # Normalised usage sums to 1 over users when anyone used anything.
    total = sum(r.norm_usage for r in results if r.user is not None)
    assert total == pytest.approx(1.0) or total == 0
