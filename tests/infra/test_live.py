"""The `live` marker: every test that needs a real external program carries it, so `make check`
never runs one and `make test` fails when one cannot run (tests/infra/live.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.infra.examples import CHECK_MAX_EXAMPLES, examples
from tests.infra.live import (
    Collected,
    failed_skip,
    is_live_service,
    live_service,
    require_live,
    unmarked_live,
)

TESTS = Path(__file__).resolve().parents[1]
# What a test module does when it needs a real program (other than through a `live_service`
# fixture, which tests/conftest.py checks at collection): start one or call one of its tools.
NEEDS_A_PROGRAM = re.compile(
    r"PrometheusServer\(|which\(\"prometheus\"\)|\[\"promtool\"|\bCHROMIUM\b|spark_session\(|\bslurm_cluster\b"
    r"|^from tests\.slurm_live",
    re.MULTILINE,
)


def test_a_test_using_a_live_fixture_without_the_marker_is_named():
    tests = [
        Collected("t.py::marked", frozenset({"live", "slow"}), frozenset({"slurm_cluster"})),
        Collected("t.py::plain", frozenset(), frozenset()),
        Collected("t.py::forgot", frozenset({"slow"}), frozenset({"history", "start_prometheus"})),
    ]

    assert unmarked_live(tests) == [
        "t.py::forgot uses history, start_prometheus but is not marked live"
    ]


def test_live_service_marks_the_fixture_function_only():
    @live_service
    def starts() -> None: ...

    def does_not() -> None: ...

    assert is_live_service(starts) and not is_live_service(does_not)


def test_only_an_explicit_setting_requires_live_tests_to_run():
    assert require_live({"GPULEDGER_REQUIRE_LIVE": "1"})
    assert not require_live({})
    assert not require_live({"GPULEDGER_REQUIRE_LIVE": "0"})


def test_under_make_test_a_live_test_that_skips_fails_naming_the_reason():
    required = {"GPULEDGER_REQUIRE_LIVE": "1"}

    failure = failed_skip("Skipped: chromium is not installed", live=True, environ=required)

    assert failure is not None and "chromium is not installed" in failure
    assert "make system-deps" in failure
    assert failed_skip("Skipped: not root", live=False, environ=required) is None
    assert failed_skip("Skipped: chromium is not installed", live=True, environ={}) is None


def test_the_check_profile_caps_explicit_example_counts():
    assert examples(300, {"HYPOTHESIS_PROFILE": "check"}) == CHECK_MAX_EXAMPLES
    assert examples(4, {"HYPOTHESIS_PROFILE": "check"}) == 4
    assert examples(300, {}) == 300
    assert examples(300, {"HYPOTHESIS_PROFILE": "explore"}) == 300


def test_every_module_that_starts_a_real_program_marks_its_tests_live():
    modules = [
        path
        for path in TESTS.rglob("test_*.py")
        if path.parent != Path(__file__).parent and NEEDS_A_PROGRAM.search(path.read_text())
    ]
    unmarked = [
        str(path.relative_to(TESTS))
        for path in modules
        if "pytest.mark.live" not in path.read_text()
    ]

    assert len(modules) >= 8  # the pattern still finds them: Slurm, Prometheus, Chromium, Spark
    assert unmarked == []


# An explicit `max_examples=` overrides the profile, so one written as a bare number would run
# its full count in `make check` too: every one goes through `examples(n)`.
EXPLICIT_COUNT = re.compile(r"\bmax_examples\s*=\s*(?!examples\()[^\s`]")


def test_every_explicit_example_count_follows_the_check_profile():
    uncapped = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in TESTS.rglob("*.py")
        if path.parent != TESTS  # tests/conftest.py registers the profiles themselves
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if EXPLICIT_COUNT.search(line)
    ]

    assert uncapped == []
