"""The command and configuration-section registries are imports (app/commands/registry.py,
app/commands/collect.py, app/config_sections.py): a module left out of them is caught here."""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import click

import app
import app.commands
from app.cli import cli

APP = Path(app.__file__).parent
# Modules under app/commands/ that hold no command of their own.
NOT_COMMANDS = {"registry"}
# Where a section is registered: `@register_section("x")`, `register_list_section("x", …)`,
# `register_table_section("x", …)`.
REGISTERS = re.compile(r"^@?register_(?:list_|table_)?section\(", re.MULTILINE)


def _reachable(group: click.Group) -> list[click.Command]:
    out: list[click.Command] = []
    for command in group.commands.values():
        out.append(command)
        if isinstance(command, click.Group):
            out.extend(_reachable(command))
    return out


def _command_modules() -> list[str]:
    names = [m.name for m in pkgutil.iter_modules(app.commands.__path__)]
    return sorted(set(names) - NOT_COMMANDS)


def test_every_command_module_is_registered_with_the_cli():
    reachable = {id(c) for c in _reachable(cli)}
    for name in _command_modules():
        module = import_module(f"app.commands.{name}")
        command = getattr(module, "command", None) or getattr(module, f"command_{name}", None)
        assert isinstance(command, click.Command), f"app/commands/{name}.py has no `command`"
        assert id(command) in reachable, (
            f"app/commands/{name}.py's command is not registered: import it in "
            "app/commands/registry.py (or, for a collector, app/commands/collect.py)"
        )


def _run(code: str) -> object:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_module_that_registers_a_section_is_loaded_with_the_configuration():
    registering = sorted(
        ".".join(("app", *path.relative_to(APP).with_suffix("").parts))
        for path in APP.rglob("*.py")
        if REGISTERS.search(path.read_text(encoding="utf-8"))
    )
    assert "app.alerts.settings" in registering  # the pattern finds the decorated classes
    loaded = _run(
        "import json, sys\n"
        "from app.config import sections\n"
        "sections()\n"
        f"print(json.dumps([m for m in {registering!r} if m not in sys.modules]))\n"
    )
    assert loaded == [], "import these modules in app/config_sections.py"


def test_one_command_module_loads_no_other():
    # The API and the job mails import app.commands.job; the package must not pull in every
    # command with it.
    loaded = _run(
        "import json, sys\n"
        "import app.commands.job\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('app.commands'))))\n"
    )
    assert loaded == ["app.commands", "app.commands.job"]
