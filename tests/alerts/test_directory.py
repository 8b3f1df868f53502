"""Routing directory files: TOML and CSV, defaults, and one-line errors."""

from __future__ import annotations

import pytest

from app.alerts.directory import Person, load_directory
from app.alerts.errors import RoutingError

CSV = """kind,name,email,slack_id,opt_out,managers
user,alice,alice@physics.example.org,U0ALICE,false,
user,dave,,,yes,
account,physics,,,,carol;pi@example.org
"""


def test_csv_directory_with_defaults(tmp_path):
    path = tmp_path / "dir.csv"
    path.write_text(CSV, encoding="utf-8")
    d = load_directory(path, "example.org")
    assert d.person("alice") == Person("alice", "alice@physics.example.org", "U0ALICE")
    assert d.person("dave").opt_out and d.person("dave").email == "dave@example.org"
    assert d.person("zoe") == Person("zoe", "zoe@example.org")  # not listed: the default
    assert [m.email for m in d.managers("physics")] == ["carol@example.org", "pi@example.org"]
    assert d.managers("chemistry") == [] and d.managers(None) == []


def test_opt_out_from_the_configuration(tmp_path):
    d = load_directory(None, "example.org", ("erin",))
    assert d.person("erin").opt_out and not d.person("frank").opt_out


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("d.csv", "kind,name\nteam,x\n", "line 2: kind 'team' is not user or account"),
        ("d.csv", "who,what\n", "expected a header with kind,name"),
        ("d.toml", "[users.a]\nopt_out = 'no'\n", "users.a.opt_out: expected true or false"),
        ("d.toml", "[accounts.p]\nmanagers = 'bob'\n", "accounts.p.managers: expected a list"),
        ("d.toml", "[groups]\n", "unknown table 'groups'"),
        ("d.toml", "users = 5\n", "users: expected a table"),
        ("d.toml", "accounts = ['p']\n", "accounts: expected a table"),
        ("d.json", "{}", "expected a .toml or .csv file"),
    ],
)
def test_bad_directory_files_name_the_problem(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RoutingError, match=message.replace("(", r"\(")):
        load_directory(path, "example.org")


@pytest.mark.parametrize("name", ["d.toml", "d.csv"])
def test_a_directory_file_that_is_not_utf8_names_it(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\xff\xfek\x00i\x00n\x00d\x00")  # UTF-16, as some editors save
    with pytest.raises(RoutingError) as info:
        load_directory(path, "example.org")
    assert str(path) in str(info.value)
    assert "UTF-8" in str(info.value)


def test_missing_directory_names_the_setting(tmp_path):
    with pytest.raises(RoutingError, match=r"does not exist \(alerts.directory\)"):
        load_directory(tmp_path / "nope.toml", "example.org")
