"""The weekly page's Users table: the users who held the most GPU-hours, not the first
accounts' users in name order (users.csv keeps them all)."""

from __future__ import annotations

import polars as pl

from app.report.html import MAX_USER_ROWS, _top_users


def test_the_table_lists_the_users_who_held_the_most_gpu_hours():
    # 30 users of account "aaa" with no usage came first by account; vision's yusuf, who
    # held the week's GPU-hours, was cut (a week of one job)
    idle = [("aaa", f"u{i:02d}", 0.0) for i in range(30)]
    used = [("vision", "yusuf", 12.5), ("bio", "bob", 3.0), ("bio", "ann", 3.0)]
    users = pl.DataFrame(idle + used, schema=["account", "user", "alloc_gpu_h"], orient="row")

    top = _top_users(users)

    assert top.select("account", "user").rows() == [
        ("vision", "yusuf"),
        ("bio", "ann"),
        ("bio", "bob"),
    ]


def test_at_most_max_rows_users_are_listed():
    rows = [("a", f"u{i:03d}", float(i + 1)) for i in range(MAX_USER_ROWS + 10)]
    users = pl.DataFrame(rows, schema=["account", "user", "alloc_gpu_h"], orient="row")

    top = _top_users(users)

    assert top.height == MAX_USER_ROWS
    assert top["alloc_gpu_h"][0] == MAX_USER_ROWS + 10
