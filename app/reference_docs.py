"""The docs site's generated references: every CLI command's `--help` and every configuration key.

The mkdocs hook `docs/hooks/reference.py` calls these at build time, so the pages are written
from the code itself and cannot drift from it; `tests/docs/test_reference.py` checks that they
name every command and every key, and `tests/app/test_pipeline_config.py` that the pipeline
page shows every default the pipeline runs with. Nothing here runs a command or reads a
configuration file.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

import click

__all__ = [
    "cli_commands",
    "cli_reference",
    "config_reference",
    "pipeline_reference",
    "source_keys",
]

# Help is rendered at this width whatever the terminal, so the page is the same on every build.
WIDTH = 100


def cli_commands() -> Iterator[tuple[str, click.Command, click.Context]]:
    """(`gpuledger collect slurm`, command, its context) for the group and every command in it."""
    from app.cli import cli

    settings = {**cli.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    root = click.Context(cli, info_name="gpuledger", **settings)
    stack: list[tuple[str, click.Command, click.Context]] = [("gpuledger", cli, root)]
    while stack:
        path, command, ctx = stack.pop(0)
        yield path, command, ctx
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                sub_ctx = click.Context(sub, info_name=name, parent=ctx)
                stack.append((f"{path} {name}", sub, sub_ctx))


def cli_reference() -> str:
    """Markdown: one section per command with its `--help`, in the order `--help` lists them."""
    lines = [
        "# CLI reference",
        "",
        "Generated from the command tree at build time (`app/reference_docs.py`): each section",
        "is exactly what `--help` prints. Every command takes `--lake DIR` (default",
        "`$GPULEDGER_LAKE`, else the configuration file's `lake`, else `./lake`). Errors are one",
        "line naming the bad value (exit 1; usage errors exit 2).",
        "",
    ]
    for path, command, ctx in cli_commands():
        summary = command.get_short_help_str(limit=WIDTH) if path != "gpuledger" else ""
        lines += [f"## `{path}`", ""]
        if summary:
            lines += [summary, ""]
        lines += ["```text", command.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(lines)


def _shown(default: Any) -> str:
    """A default as the configuration table writes it."""
    if default is None or default == ():
        return "—"
    if default == "":
        return '`""`'
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, tuple):
        return "`" + ", ".join(str(d) for d in default) + "`"
    return f"`{default}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type_name(hint: Any) -> str:
    """`str`, `float`, `tuple[str, ...]`, `Path or none` for a field's annotation."""
    text = hint.__name__ if isinstance(hint, type) and not typing.get_args(hint) else str(hint)
    text = text.replace("pathlib.", "").replace(" | None", " or none")
    return f"`{text}`"


def source_keys() -> dict[str, list[tuple[str, str, str]]]:
    """Per `[[sources]]` kind: (key, type, default) for each key its entries take."""
    from app.service.settings import SOURCE_KINDS

    out: dict[str, list[tuple[str, str, str]]] = {}
    for kind, cls in SOURCE_KINDS.items():
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                default = _shown(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = _shown(f.default_factory())
            else:
                default = "required"
            rows.append((f.name, _type_name(hints[f.name]), default))
        out[kind] = rows
    return out


def config_reference() -> str:
    """Markdown: every key of every registered section, then every `[[sources]]` kind's keys."""
    from app.config import describe_settings, sections

    infos = describe_settings()
    lines = [
        "# Configuration reference",
        "",
        "Generated from the section registry at build time (`app/config.py`: every",
        "`@register_section` class and its `setting(default, help)` fields; `[[sources]]` from",
        "`app/service/settings.py`). `gpuledger config check` prints the same keys with their",
        "effective values and where each came from.",
        "",
        "One TOML file: `--config FILE`, else `$GPULEDGER_CONFIG`, else `./gpuledger.toml` when",
        "present. Every key but those of `[[sources]]` can be overridden from the environment as",
        "`GPULEDGER_<SECTION>_<KEY>` (upper case; lists comma-separated, booleans `true`/`false`);",
        "`GPULEDGER_LAKE` sets the lake. Secret keys (marked below) are never written in the file:",
        "they come from their variable or from `<key>_file`, a file only its owner can read.",
        "",
    ]
    for name in sections():
        lines += [
            f"## `[{name}]`",
            "",
            "| key | environment | default | meaning |",
            "|---|---|---|---|",
        ]
        for info in infos:
            if info.key.split(".", 1)[0] != name:
                continue
            meaning = _cell(info.help) + (" **Secret.**" if info.secret else "")
            lines.append(f"| `{info.key}` | `{info.env}` | {_shown(info.default)} | {meaning} |")
        lines.append("")
    lines += [
        "## `[[sources]]`",
        "",
        "An array of tables: one entry per source `gpuledger run` collects, each with `kind` and",
        "that kind's keys (no environment overrides; a `GPULEDGER_SOURCES_…` variable is an",
        "error). Errors name the entry and key (`sources[1].url: expected an http(s):// URL …`).",
        "",
    ]
    for kind, rows in source_keys().items():
        lines += [f'### `kind = "{kind}"`', "", "| key | type | default |", "|---|---|---|"]
        lines += [f"| `{key}` | {kind_name} | {default} |" for key, kind_name, default in rows]
        lines.append("")
    return "\n".join(lines)


def pipeline_reference() -> str:
    """Markdown: the pipeline's tables (`[attribute]`, `[detect.<detector>]`,
    `[recommend.<kind>]`), every key with its built-in default, from `app.pipeline.settings`."""
    from app.pipeline.settings import DETECTOR_NAMES, reference_markdown
    from detectors.recommend import KIND_FIELDS

    return "\n".join(
        [
            "# Pipeline configuration reference",
            "",
            "Generated at build time from the one place the pipeline's defaults are built",
            "(`app/pipeline/settings.py`, `reference_markdown()`; the values are the documented",
            "fields of `warehouse/attribution.py`, `detectors/rules/` and",
            "`detectors/recommend/config.py`). How the tables combine, their environment",
            "variables and `gpuledger config check`: [the configuration",
            "file](../operations/configuration.md#the-pipeline-attribute-detect-recommend).",
            "",
            "Detectors (`[detect.<detector>]`): "
            + ", ".join(f"`{n}`" for n in DETECTOR_NAMES)
            + ".",
            "",
            "Recommenders (`[recommend.<kind>]`): "
            + ", ".join(f"`{k}`" for k in KIND_FIELDS)
            + ".",
            "",
            reference_markdown(),
        ]
    )
