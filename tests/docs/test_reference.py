"""The generated references (app/reference_docs.py, written into the docs site at build time by
docs/hooks/reference.py) name every command with its --help and every configuration key."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from app.cli import cli
from app.config import describe_settings
from app.reference_docs import cli_reference, config_reference, source_keys
from app.service.settings import SOURCE_KINDS

ROOT = Path(__file__).resolve().parents[2]


def all_commands() -> list[tuple[str, click.Command]]:
    out, stack = [], [("gpuledger", cli)]
    while stack:
        path, command = stack.pop()
        out.append((path, command))
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                stack.append((f"{path} {name}", sub))
    return out


def test_the_cli_reference_has_a_section_with_the_help_of_every_command():
    page = cli_reference()
    commands = all_commands()
    assert len(commands) > 25
    for path, command in commands:
        assert f"\n## `{path}`\n" in page, path
        section = page.split(f"\n## `{path}`\n", 1)[1].split("\n## `", 1)[0]
        assert f"Usage: {path} " in section, path
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in section, f"{path}: {opt} is not in its reference"


def test_the_configuration_reference_has_every_key_with_its_variable_and_default():
    page = config_reference()
    infos = describe_settings()
    assert len(infos) > 40
    for info in infos:
        row = re.search(
            rf"^\| `{re.escape(info.key)}` \| `{info.env}` \| (.+?) \| (.+) \|$", page, re.M
        )
        assert row, f"{info.key} is not in the configuration reference"
        assert row.group(2).startswith(info.help.replace("|", "\\|")), info.key
        if info.default is None:
            assert row.group(1) == "—", info.key
        elif not isinstance(info.default, tuple):
            assert str(info.default).lower() in row.group(1).lower() or info.default == "", info.key


def test_the_configuration_reference_has_every_source_kind_and_key():
    page = config_reference()
    assert set(source_keys()) == set(SOURCE_KINDS)
    for kind, rows in source_keys().items():
        section = page.split(f'### `kind = "{kind}"`', 1)[1].split("\n### ", 1)[0]
        assert {key for key, _, _ in rows} >= {"cluster", "every_s"}, kind
        for key, _, _ in rows:
            assert f"| `{key}` |" in section, f"{kind}.{key}"
    assert "| `url` | `str` | required |" in page  # prometheus needs its URL


@pytest.mark.slow  # ~10 s on a loaded 2-core machine; `make lint` builds the site too
@pytest.mark.skipif(
    shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
    reason="mkdocs is in the dev extra",
)
def test_the_site_builds_strict_with_the_generated_pages(tmp_path):
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text("utf-8")
    config_page = (tmp_path / "site" / "reference" / "configuration" / "index.html").read_text()
    assert "gpuledger collect slurm-shares" in cli_page
    assert "alerts.smtp_password" in config_page
    assert (tmp_path / "site" / "design" / "index.html").is_file()
    pipeline_page = (tmp_path / "site" / "reference" / "pipeline" / "index.html").read_text()
    assert "detect.&lt;detector&gt;" in pipeline_page and "min_stranded_gpus" in pipeline_page
