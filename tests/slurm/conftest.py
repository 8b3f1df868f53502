"""Fixtures of the Slurm collector tests: recorded outputs and a fake Slurm runner.

The fake runner stands in for `run_command` (an injected seam, not a patched subprocess): it
answers each kind of command with recorded text, and `sacct --jobs=…` with the recorded lines
of just those jobs, as sacct would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from collector.sources.slurm.collect import SlurmCommandError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def read_fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


class FakeSlurm:
    """A runner that answers sacct and scontrol from recorded outputs and records the calls."""

    def __init__(
        self,
        sacct: str,
        scontrol: str = "No jobs in the system\n",
        *,
        by_id: str | None = None,
        helpformat: str | None = None,
        fail: dict[str, str] | None = None,
    ) -> None:
        self.sacct = sacct
        self.by_id = sacct if by_id is None else by_id
        self.scontrol = scontrol
        self.helpformat = read_fixture("handmade/sacct-helpformat-22.05.txt")
        if helpformat is not None:
            self.helpformat = helpformat
        self.fail = fail or {}
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        argv = list(argv)
        self.calls.append(argv)
        assert all(isinstance(a, str) for a in argv), "arguments, never a shell string"
        kind = argv[0]
        if "--helpformat" in argv:
            kind = "sacct --helpformat"
        elif any(a.startswith("--jobs=") for a in argv):
            kind = "sacct --jobs"
        if kind in self.fail:
            raise SlurmCommandError(self.fail[kind], argv)
        if kind == "sacct --helpformat":
            return self.helpformat
        if kind == "sacct --jobs":
            wanted = next(a for a in argv if a.startswith("--jobs=")).split("=", 1)[1].split(",")
            return delimited(
                "".join(
                    line + "\n"
                    for line in self.by_id.splitlines()
                    if line.split("|", 1)[0].split(".", 1)[0] in wanted
                ),
                argv,
            )
        if kind == "sacct":
            return delimited(self.sacct, argv)
        if kind == "scontrol":
            return self.scontrol
        raise SlurmCommandError(f"{kind!r} not found on PATH", argv)

    def calls_of(self, kind: str) -> list[list[str]]:
        """The calls whose argv starts with `kind` (e.g. `sacct`) and holds its other words."""
        words = kind.split()
        return [c for c in self.calls if c[0] == words[0] and all(w in c for w in words[1:])]


def delimited(text: str, argv: Sequence[str]) -> str:
    """Recorded sacct output (fields separated by `|`) as sacct prints it with the call's
    `--delimiter`: each line's first (fields - 1) `|` are the separators, JobName (last) keeps
    its own. Lines of fewer fields (a record's name broken over lines, a bad line) likewise."""
    given = [a.split("=", 1)[1] for a in argv if a.startswith("--delimiter=")]
    if not given:
        return text
    fields = next(a for a in argv if a.startswith("--format=")).count(",") + 1
    return "".join(line.replace("|", given[0], fields - 1) + "\n" for line in text.splitlines())


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    return read_fixture


@pytest.fixture
def fake_slurm() -> type[FakeSlurm]:
    return FakeSlurm
