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


# ---------------------------------------------------------------- untrusted user names (#22)

HOSTILE_USERS = [
    "eve@evil.example.com",
    "eve, boss@example.org",
    "alice\nBcc: all@example.org",
    "a b",
    "<eve@evil.example.com>",
    "eve@evil.example.com,",
    "",
]


@pytest.mark.parametrize("user", HOSTILE_USERS)
def test_a_user_name_that_is_no_plain_name_gets_no_address(user):
    d = load_directory(None, "example.org")
    assert d.person(user).email is None


def test_no_address_outside_the_email_domain_even_from_the_directory(tmp_path):
    path = tmp_path / "dir.toml"
    path.write_text(
        '[users.alice]\nemail = "alice@physics.example.org"\n'
        '[users.mallory]\nemail = "mallory@example.org.evil.net"\nslack_id = "U0MAL"\n'
        '[users.trudy]\nemail = "trudy@example.org, boss@evil.net"\n'
        '[accounts.physics]\nmanagers = ["pi@example.org", "outsider@elsewhere.org", "alice"]\n',
        encoding="utf-8",
    )
    d = load_directory(path, "example.org")
    assert d.person("alice").email == "alice@physics.example.org"  # a subdomain is inside
    mallory = d.person("mallory")
    assert mallory.email is None and mallory.slack_id == "U0MAL"  # Slack still reaches her
    assert d.person("trudy").email is None
    assert [m.email for m in d.managers("physics")] == [
        "pi@example.org",
        None,
        "alice@physics.example.org",
    ]


@pytest.mark.parametrize(
    ("address", "ok"),
    [
        ("bob@example.org", True),
        ("bob@Physics.Example.ORG", True),
        ("bob@notexample.org", False),
        ("bob@example.org.evil.net", False),
        ("bob@example.org@evil.net", False),
        ("bob@example.org,eve@evil.net", False),
        ("Bob <bob@example.org>", False),
        ("bob@example.org\r\nBcc: eve@evil.net", False),
    ],
)
def test_in_domain(address, ok):
    from app.alerts.directory import in_domain

    assert in_domain(address, "example.org") is ok
