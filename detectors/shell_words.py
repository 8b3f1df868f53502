"""Values made safe to paste: one shell word, or the text of a `# …` comment line.

Every command gpuledger writes for a person to run (a recommendation's sacctmgr/scontrol
lines, an alert's fix) interpolates values through these. Apart from the recommenders so that
the alerts' fixes use them without loading pyarrow.
"""

from __future__ import annotations

import shlex

__all__ = ["scontrol_on", "sh", "sh_comment"]


def sh(value: object) -> str:
    """`value` as exactly one shell word (`shlex.quote`), for every value a generated command
    interpolates: an account named `a; rm -rf ~` or `$(id)` stays one argument when the
    command is copied into a shell. A plain name (letters, digits, `@%+=:,./-_`) stays bare."""
    return shlex.quote(str(value))


def scontrol_on(cluster: str) -> str:
    """`scontrol -M <cluster>`: a generated scontrol command aims at the one cluster its
    figures are of, as the sacctmgr lines name theirs (`cluster=`): node and partition names
    repeat across clusters, and the login node a line is pasted on may be another cluster's.
    A lake named otherwise than Slurm names the cluster gets a command Slurm refuses, never
    one run on another cluster."""
    return f"scontrol -M {sh(cluster)}"


def sh_comment(value: object) -> str:
    """`value` inside a `# …` comment line of a generated script: control characters (a
    newline would end the comment and start a command) become `?`."""
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in str(value))
