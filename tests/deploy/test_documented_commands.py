"""Every `gpuledger …` command line the docs show names a real command and real options.

Read from README.md and the docs site's pages (code blocks and inline code), every file under
deploy/ (units, comments, cron lines) and the examples in each command's own --help. A line that
holds placeholders (`--lake DIR [--since T]`) must name commands and options that exist; a
concrete line (no placeholder) must also parse with the real click CLI, values included (ranges,
URLs, choices).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from app.cli import cli
from tests.docs.pages import pages
from tests.docs.pages import where as doc_name

ROOT = Path(__file__).resolve().parents[2]
# `gpuledger` as a program: at the start, after a path (`/opt/…/bin/gpuledger`), `sudo -u x`,
# `$ `, or `--` (kubectl exec … -- gpuledger status)
PROGRAM = re.compile(r"(?:^|\s|/|\$ )gpuledger(?=\s|$)")
NOT_ARGUMENTS = {"-g", "-o", "exec", "create", "gpuledger", "gpuledger-dashboard", "--"}
PLACEHOLDER = re.compile(r"[\[\]|…()<>]|^[A-Z][A-Z_]*$")


@dataclass(frozen=True)
class Documented:
    where: str
    line: str


def _commands_in(text: str) -> Iterator[str]:
    """`gpuledger …` command lines in one piece of code (a line, a span), comments cut."""
    text = re.sub(r"\\\s*\n\s*", " ", text)  # shell line continuations
    for line in text.splitlines():
        line = re.sub(r"\s+#.*$", "", line.strip())
        line = re.sub(r"^#\s*", "", line)  # a comment that shows a command
        # `gpuledger train / … evaluate`, `gpuledger attribute && gpuledger detect`
        for piece in re.split(r"\s(?:/|&&|;)\s", line):
            if "useradd" in piece or "install " in piece:
                continue  # `gpuledger` as a user or group name, not the program
            for match in PROGRAM.finditer(piece):
                words = piece[match.end() :].split()
                # `sudo -u gpuledger /opt/…/gpuledger`, `kubectl -n gpuledger exec`: a name
                before = piece[: match.start() + 1].split()[-1:]
                if before in (["-n"], ["-u"], ["-o"], ["-g"], ["user"]):  # `kubectl -n gpuledger`
                    continue
                if words and (words[0][0] in "/." or words[0] in NOT_ARGUMENTS):
                    continue
                yield "gpuledger" + piece[match.end() :]
                break


def docs_commands() -> list[Documented]:
    found = []
    fenced = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
    for path in pages():
        text, name = path.read_text(encoding="utf-8"), doc_name(path)
        for block in fenced.finditer(text):
            line_no = text.count("\n", 0, block.start()) + 1
            for cmd in _commands_in(block.group(1)):
                found.append(Documented(f"{name}:{line_no} (code block)", cmd))
        prose = fenced.sub("", text)
        for span in re.finditer(r"`([^`]+)`", prose, re.S):
            code = " ".join(span.group(1).split())
            if PROGRAM.search(code) and re.search(r"gpuledger\s+[a-z-]+", code):
                found.extend(Documented(f"{name} (inline)", c) for c in _commands_in(code))
    return found


def deploy_commands() -> list[Documented]:
    found = []
    for path in sorted((ROOT / "deploy").rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        for span in re.finditer(r"`([^`]+)`", text):  # inline code in comments
            found.extend(
                Documented(f"{path.relative_to(ROOT)} (inline)", c)
                for c in _commands_in(span.group(1))
            )
        text = re.sub(r"`[^`]*`", "", text)
        for n, line in enumerate(text.splitlines(), 1):
            # a command is what a unit starts, or a comment line indented as an example
            # (`#   gpuledger config check …`), not prose about gpuledger
            cron = re.match(r"(?:[\d*/,-]+\s+){5}\S+\s+(?=\S*gpuledger\s)", line)
            if cron:  # minute hour day month weekday user command
                line = line[cron.end() :]
            elif not re.match(r"ExecStart=|#\s{2,}\S", line):
                continue
            line = line.removeprefix("ExecStart=")
            for cmd in _commands_in(line):
                found.append(Documented(f"{path.relative_to(ROOT)}:{n}", cmd))
    return found


def _walk(group: click.Group, path: str) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(click.Context(group)):
        sub = group.get_command(click.Context(group), name)
        assert sub is not None
        yield f"{path} {name}", sub
        if isinstance(sub, click.Group):
            yield from _walk(sub, f"{path} {name}")


def help_commands() -> list[Documented]:
    found = []
    for path, command in [("gpuledger", cli), *_walk(cli, "gpuledger")]:
        examples = [ln for ln in (command.help or "").splitlines() if ln.startswith(" ")]
        for cmd in _commands_in("\n".join(examples)):
            found.append(Documented(f"`{path} --help`", cmd))
    return found


def everything() -> list[Documented]:
    return docs_commands() + deploy_commands() + help_commands()


def resolve(argv: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """(the command the words name, its path, the words left for it)."""
    command: click.Command = cli
    path = ["gpuledger"]
    while isinstance(command, click.Group) and argv and not argv[0].startswith("-"):
        sub = command.get_command(click.Context(command), argv[0])
        assert sub is not None, f"no command {' '.join([*path, argv[0]])!r}"
        command, path, argv = sub, [*path, argv[0]], argv[1:]
    return command, path, argv


def option_names(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def check(doc: Documented) -> None:
    argv = shlex.split(doc.line)[1:]
    command, path, rest = resolve(argv)
    known = option_names(command)
    for word in rest:
        for token in re.split(r"[\[\]()|]", word):
            if token.startswith("-") and len(token) > 1 and not token[1:].isdigit():
                option = token.split("=", 1)[0]
                assert option in known, (
                    f"{doc.where}: {' '.join(path)} has no option {option!r} "
                    f"(known: {', '.join(sorted(known))})"
                )
    if not rest or any(PLACEHOLDER.search(w) for w in rest) or isinstance(command, click.Group):
        return  # a mention or a synopsis: names checked above, values are placeholders
    parent = cli.make_context("gpuledger", [], resilient_parsing=True)
    with parent:
        command.make_context(path[-1], list(rest), parent=parent)


def test_the_docs_show_command_lines_and_the_extraction_finds_them():
    # the extraction must see the lines the operator copies, or the test below checks nothing
    lines = {d.line for d in everything()}
    assert "gpuledger run" in lines  # gpuledger.service's ExecStart
    assert "gpuledger config check --config /etc/gpuledger/gpuledger.toml" in lines
    assert "gpuledger status --lake /var/lib/gpuledger/lake" in lines  # the Slurm recipe
    assert "gpuledger alert --follow --interval 60" in lines
    assert "gpuledger collect slurm-shares --cluster della" in lines  # deploy/cron/gpuledger
    assert any(d.where.startswith("`gpuledger collect nvml --help`") for d in everything())
    assert len(lines) > 60


@pytest.mark.parametrize(
    "doc", everything(), ids=lambda d: f"{d.where}: {d.line}"[:120].replace(" ", "_")
)
def test_every_documented_command_line_parses_with_the_real_cli(doc, monkeypatch, tmp_path):
    for var in [v for v in os.environ if v.startswith("GPULEDGER_")]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)  # no ./gpuledger.toml; a default --lake resolves harmlessly
    check(doc)


@pytest.mark.parametrize(
    "line, problem",
    [
        ("gpuledger run --metrics-port 9746", "no option '--metrics-port'"),
        ("gpuledger compact --lake DIR", "no command 'gpuledger compact'"),
        ("gpuledger collect nvml --cluster c --interval 0.5", "0.5"),
        ("gpuledger status [--watch]", "no option '--watch'"),
    ],
)
def test_the_check_fails_on_a_drifted_line(line, problem, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises((AssertionError, click.ClickException)) as caught:
        check(Documented("a doc", line))
    assert problem in str(caught.value) or problem in getattr(caught.value, "message", "")


REPO_ROOTS = (
    "deploy/", "app/", "sql/", "collector/", "warehouse/", "detectors/", "tests/", "docs/",
    "scripts/",
)  # fmt: skip


def named_paths() -> list[tuple[str, str]]:
    """(where, path) for every repository path the docs (inline code) and deploy/ files name."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"`([^`\s]+)`", text):
            if match.group(1).startswith(REPO_ROOTS):
                found.append((doc_name(page), match.group(1).rstrip(".,;:)")))
    for path in sorted((ROOT / "deploy").rglob("*")):
        if path.is_file():
            # `kubectl … deploy/gpuledger` names a Deployment, not a folder
            pattern = r"(?<![\w/])(?<!exec )(?<!restart )((?:deploy|app|sql|tests)/[\w./-]+)"
            for name in re.findall(pattern, path.read_text()):
                found.append((str(path.relative_to(ROOT)), name.rstrip(".,;:)")))
    return found


def test_every_repository_path_the_docs_name_exists():
    paths = named_paths()
    assert len(paths) > 50
    for where, name in paths:
        if re.search(r"[*<…{]", name):  # a pattern: `app/alerts/templates/*.j2`, `epilog-…`
            glob = re.sub(r"<[^>]+>|…|\{[^}]*\}", "*", name)
            assert list(ROOT.glob(glob)), f"{where}: nothing matches {name!r}"
        else:
            assert (ROOT / name).exists(), f"{where}: {name!r} does not exist"
