"""Slurm host lists and index lists expand as Slurm writes them; bad ones are named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.errors import MalformedSample
from collector.sources.slurm.hostlist import expand_hostlist, expand_ranges, split_top_level


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("vm", ["vm"]),
        ("gpu-node[01-02]", ["gpu-node01", "gpu-node02"]),
        (
            "gpu-node[01-04,07]",
            ["gpu-node01", "gpu-node02", "gpu-node03", "gpu-node04", "gpu-node07"],
        ),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),  # no padding: widths grow
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),  # padding kept from the lower bound
        ("a[1-2]-ib[0-1]", ["a1-ib0", "a1-ib1", "a2-ib0", "a2-ib1"]),  # several groups
        ("gpu-node01,cpu[1-2]", ["gpu-node01", "cpu1", "cpu2"]),  # several host lists
        ("r1n[1,3],r2n[2-3]", ["r1n1", "r1n3", "r2n2", "r2n3"]),
        ("n[1-2],n1", ["n1", "n2"]),  # duplicates once
        ("None assigned", []),  # a pending job
        ("", []),
        ("(null)", []),
    ],
)
def test_host_lists_expand_in_order(text, expected):
    assert expand_hostlist(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("gpu-node[01-", "unbalanced brackets"),
        ("gpu-node01]", "unbalanced ']'"),
        ("n[5-2]", "runs backwards"),
        ("n[a-b]", "invalid range 'a-b'"),
        ("n[]", "invalid bracket group"),
        ("n1,,n2", "empty item"),
        ("n[1-99999999]", "too many"),
        ("a[1-99999]b[1-99999]", "too many"),  # refused before 10^10 names are built
    ],
)
def test_bad_host_lists_are_refused_with_the_reason(text, reason):
    with pytest.raises(MalformedSample, match=reason):
        expand_hostlist(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-1", ["0", "1"]),
        ("0,2-3", ["0", "2", "3"]),
        ("7", ["7"]),
        ("2-5%2", ["2", "3", "4", "5"]),  # an array throttle is not a range
        ("1-7:3", ["1", "4", "7"]),  # an array step
    ],
)
def test_index_and_array_ranges_expand(text, expected):
    assert expand_ranges(text) == expected


def test_top_level_split_ignores_commas_inside_brackets_and_parentheses():
    assert split_top_level("a[1,2],b") == ["a[1,2]", "b"]
    assert split_top_level("gpu:2(IDX:0,2),nic:1") == ["gpu:2(IDX:0,2)", "nic:1"]


@given(
    prefix=st.sampled_from(["gpu-node", "n", "a1b"]),
    numbers=st.lists(st.integers(0, 500), min_size=1, max_size=20, unique=True),
    width=st.integers(1, 4),
)
def test_a_bracketed_list_of_numbers_expands_to_exactly_those_hosts(prefix, numbers, width):
    names = [f"{prefix}{n:0{width}d}" for n in sorted(numbers)]
    listed = ",".join(f"{n:0{width}d}" for n in sorted(numbers))

    assert expand_hostlist(f"{prefix}[{listed}]") == names
