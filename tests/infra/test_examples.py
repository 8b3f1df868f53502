"""`make check` runs fewer and smaller cases than `make test` (tests/infra/examples.py)."""

from __future__ import annotations

from tests.infra.examples import CHECK_MAX_EXAMPLES, CHECK_PROFILE, PROFILE_ENV, examples, sized

CHECK = {PROFILE_ENV: CHECK_PROFILE}
FULL: dict[str, dict[str, str]] = {
    "make test": {},
    "repeatable": {PROFILE_ENV: "repeatable"},
    "explore": {PROFILE_ENV: "explore"},
}


def test_examples_are_capped_only_under_the_check_profile():
    assert examples(200, CHECK) == CHECK_MAX_EXAMPLES
    assert examples(2, CHECK) == 2  # a count under the cap stands
    assert {name: examples(200, env) for name, env in FULL.items()} == dict.fromkeys(FULL, 200)
    # a costly property asks for fewer under check, never more than the cap, and keeps its count
    assert examples(20, CHECK, check=2) == 2
    assert examples(20, CHECK, check=50) == CHECK_MAX_EXAMPLES
    assert {name: examples(20, env, check=2) for name, env in FULL.items()} == dict.fromkeys(
        FULL, 20
    )


def test_sized_gives_the_check_size_only_under_the_check_profile():
    assert sized(7, 2, CHECK) == 2
    assert {name: sized(7, 2, env) for name, env in FULL.items()} == dict.fromkeys(FULL, 7)
    assert sized(("a", "b", "c"), ("a",), CHECK) == ("a",)
