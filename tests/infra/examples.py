"""Hypothesis example counts that follow the loop: fewer in `make check`, as written in `make test`.

tests/conftest.py loads a profile by HYPOTHESIS_PROFILE: `repeatable` (the default, `make test`:
derandomized, the counts as written), `check` (`make check`: derandomized, at most
CHECK_MAX_EXAMPLES per property) or `explore` (fresh random examples). A test that asks for its
own count writes `@settings(max_examples=examples(200))`, so `check` caps it too; one whose
examples each build a lake writes `examples(20, check=2)`: 2 under `check`, 20 in `make test`.

Inputs that cost seconds (a simulated lake's GPUs and days) follow the same loop with `sized`:
the size as written under `make test`, a smaller one that still exercises the same behaviour
under `make check`.
"""

from __future__ import annotations

import os
from typing import TypeVar

PROFILE_ENV = "HYPOTHESIS_PROFILE"
CHECK_PROFILE = "check"
CHECK_MAX_EXAMPLES = 5

T = TypeVar("T")


def _checking(environ: dict[str, str] | None) -> bool:
    return (os.environ if environ is None else environ).get(PROFILE_ENV, "") == CHECK_PROFILE


def examples(
    n: int, environ: dict[str, str] | None = None, *, check: int = CHECK_MAX_EXAMPLES
) -> int:
    """`n` examples, capped at `check` (CHECK_MAX_EXAMPLES, or fewer for a property whose
    every example builds a lake and costs most of a second) under the `check` profile."""
    return min(n, check, CHECK_MAX_EXAMPLES) if _checking(environ) else n


def sized(full: T, check: T, environ: dict[str, str] | None = None) -> T:
    """`full` as written (`make test`), `check` under the `check` profile (`make check`).

    For inputs whose size costs seconds, e.g. `SimConfig(gpus=16, days=sized(7, 2))`. The
    `check` size must still give every assertion of the test something to bite on (a lake that
    still crosses midnight, still has idle and multi-GPU jobs ...); where it would not, keep the
    full size.
    """
    return check if _checking(environ) else full
