"""Hypothesis example counts that follow the loop: fewer in `make check`, as written in `make test`.

tests/conftest.py loads a profile by HYPOTHESIS_PROFILE: `repeatable` (the default, `make test`:
derandomized, the counts as written), `check` (`make check`: derandomized, at most
CHECK_MAX_EXAMPLES per property) or `explore` (fresh random examples). A test that asks for its
own count writes `@settings(max_examples=examples(200))`, so `check` caps it too.
"""

from __future__ import annotations

import os

PROFILE_ENV = "HYPOTHESIS_PROFILE"
CHECK_PROFILE = "check"
CHECK_MAX_EXAMPLES = 5


def examples(n: int, environ: dict[str, str] | None = None) -> int:
    """`n` examples, capped at CHECK_MAX_EXAMPLES under the `check` profile."""
    profile = (os.environ if environ is None else environ).get(PROFILE_ENV, "")
    return min(n, CHECK_MAX_EXAMPLES) if profile == CHECK_PROFILE else n
