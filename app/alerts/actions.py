"""Run the configured action on an idle job (scancel or a pod delete) as an argument list.

The ledger's audit record is written before the command runs and completed after, so an
action is attempted at most once per job, even across crashes. No shell is involved.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Protocol

__all__ = ["ActionRunner", "SubprocessRunner"]

ACTION_TIMEOUT_S = 60


class ActionRunner(Protocol):
    """Runs one command; returns its exit status and combined output."""

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]: ...


class SubprocessRunner:
    """The real runner: `subprocess.run(argv)` with a timeout, never through a shell."""

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=ACTION_TIMEOUT_S,
                check=False,
            )
        except FileNotFoundError:
            return 127, f"{argv[0]}: command not found"
        except subprocess.TimeoutExpired:
            return 124, f"{argv[0]}: timed out after {ACTION_TIMEOUT_S} s"
        return done.returncode, (done.stdout + done.stderr).strip()
