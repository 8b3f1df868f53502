"""Routing: who a user is (email, Slack ID, opt-out) and who manages an account.

The directory is a TOML or CSV file (`alerts.directory`), an export of LDAP or the site's user
database. Users without an entry are mailed at `<user>@<email_domain>` and have no Slack ID.

User names come from the lake, and some sources take them from input their users write (a
pod's labels): only one plain name (`collector.names`) becomes `<user>@<email_domain>`, and no
address outside `email_domain` (or its subdomains) is ever mailed — not even a directory
entry's; such a person is reached on Slack only, or not at all (`Person.email` is None).

TOML::

    [users.alice]
    email = "alice@physics.example.org"
    slack_id = "U012ABCDEF"
    name = "Alice"
    opt_out = false

    [accounts.physics]
    managers = ["bob", "pi-physics@example.org"]   # user names or addresses

CSV (header required; `managers` separated by `;`)::

    kind,name,email,slack_id,opt_out,managers
    user,alice,alice@physics.example.org,U012ABCDEF,false,
    account,physics,,,,bob;pi-physics@example.org
"""

from __future__ import annotations

import csv
import logging
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.alerts.errors import RoutingError
from collector.names import valid_name

__all__ = ["Directory", "Person", "in_domain", "load_directory"]

_TRUE = {"1", "true", "yes", "y"}
# one plain address: local part and domain of letters, digits and . _ % + -; nothing else
_ADDRESS = re.compile(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)")
logger = logging.getLogger(__name__)


def in_domain(address: str, domain: str) -> bool:
    """Whether `address` is one plain address at `domain` or one of its subdomains."""
    found = _ADDRESS.fullmatch(address)
    if found is None:
        return False
    host, want = found.group(1).lower(), domain.strip().lower().strip(".")
    return bool(want) and (host == want or host.endswith(f".{want}"))


@dataclass(frozen=True, slots=True)
class Person:
    """Where one person is reached. `user` is None for a bare address (a list, a PI alias)."""

    user: str | None
    email: str | None
    slack_id: str | None = None
    name: str | None = None
    opt_out: bool = False

    @property
    def greeting_name(self) -> str:
        """The name to greet with: the directory's name, else the user name, else 'there'."""
        return self.name or self.user or "there"


@dataclass(frozen=True, slots=True)
class Directory:
    """Users and account managers, with the defaults of DESIGN §7."""

    email_domain: str
    users: dict[str, Person] = field(default_factory=dict)
    managers_by_account: dict[str, tuple[str, ...]] = field(default_factory=dict)
    opted_out: frozenset[str] = frozenset()

    def mailable(self, address: str | None) -> str | None:
        """`address` when it is one plain address within `email_domain`, else None (logged)."""
        if address is None or in_domain(address, self.email_domain):
            return address
        logger.warning(
            "not mailing %r: not one address within alerts.email_domain %r",
            address[:80],
            self.email_domain,
        )
        return None

    def person(self, user: str) -> Person:
        """The directory entry of `user`, else `<user>@<email_domain>` with no Slack ID; no
        email for a user name that is not one plain name or an address outside the domain."""
        known = self.users.get(user)
        if known is None:
            email = f"{user}@{self.email_domain}" if valid_name(user) else None
            known = Person(user=user, email=email)
        email = self.mailable(known.email)
        opt_out = known.opt_out or user in self.opted_out
        if email != known.email or opt_out != known.opt_out:
            known = Person(known.user, email, known.slack_id, known.name, opt_out=opt_out)
        return known

    def managers(self, account: str | None) -> list[Person]:
        """The managers of `account` (names resolved through the directory)."""
        if account is None:
            return []
        out = []
        for entry in self.managers_by_account.get(account, ()):
            if "@" in entry:
                out.append(Person(user=None, email=self.mailable(entry)))
            else:
                out.append(self.person(entry))
        return out


def _text(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise RoutingError(f"{where}: expected text, got {value!r}")
    return value.strip() or None


def _from_toml(path: Path, domain: str, opted_out: frozenset[str]) -> Directory:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RoutingError(f"directory {str(path)!r} is not valid TOML: {exc}") from None
    except RecursionError:  # (as the configuration file: app/config.py)
        raise RoutingError(
            f"directory {str(path)!r} is not valid TOML: its arrays or tables are nested too deeply"
        ) from None
    unknown = sorted(set(data) - {"users", "accounts"})
    if unknown:
        raise RoutingError(f"directory {str(path)!r}: unknown table {unknown[0]!r}")
    for table in ("users", "accounts"):
        if not isinstance(data.get(table, {}), dict):
            raise RoutingError(
                f"directory {str(path)!r}: {table}: expected a table ([{table}.NAME]), "
                f"got {data[table]!r}"
            )
    users = {}
    for user, entry in data.get("users", {}).items():
        where = f"directory {path.name}: users.{user}"
        if not isinstance(entry, dict):
            raise RoutingError(f"{where}: expected a table")
        opt_out = entry.get("opt_out", False)
        if not isinstance(opt_out, bool):
            raise RoutingError(f"{where}.opt_out: expected true or false, got {opt_out!r}")
        users[user] = Person(
            user=user,
            email=_text(entry.get("email"), f"{where}.email") or f"{user}@{domain}",
            slack_id=_text(entry.get("slack_id"), f"{where}.slack_id"),
            name=_text(entry.get("name"), f"{where}.name"),
            opt_out=opt_out,
        )
    managers = {}
    for account, entry in data.get("accounts", {}).items():
        listed = entry.get("managers", []) if isinstance(entry, dict) else None
        if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
            raise RoutingError(
                f"directory {path.name}: accounts.{account}.managers: expected a list of names"
            )
        managers[account] = tuple(listed)
    return Directory(domain, users, managers, opted_out)


def _from_csv(path: Path, domain: str, opted_out: frozenset[str]) -> Directory:
    users: dict[str, Person] = {}
    managers: dict[str, tuple[str, ...]] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"kind", "name"} <= set(reader.fieldnames):
            raise RoutingError(
                f"directory {str(path)!r}: expected a header with kind,name,email,slack_id,"
                "opt_out,managers"
            )
        for line_no, row in enumerate(reader, start=2):
            kind, name = (row.get("kind") or "").strip(), (row.get("name") or "").strip()
            if not name:
                raise RoutingError(f"directory {path.name} line {line_no}: empty name")
            if kind == "user":
                users[name] = Person(
                    user=name,
                    email=(row.get("email") or "").strip() or f"{name}@{domain}",
                    slack_id=(row.get("slack_id") or "").strip() or None,
                    name=None,
                    opt_out=(row.get("opt_out") or "").strip().lower() in _TRUE,
                )
            elif kind == "account":
                raw = row.get("managers") or ""
                managers[name] = tuple(m.strip() for m in raw.split(";") if m.strip())
            else:
                raise RoutingError(
                    f"directory {path.name} line {line_no}: kind {kind!r} is not user or account"
                )
    return Directory(domain, users, managers, opted_out)


def load_directory(
    path: Path | None, email_domain: str, opted_out: tuple[str, ...] = ()
) -> Directory:
    """Read the directory file (by suffix: .toml or .csv); no file means defaults only."""
    out = frozenset(opted_out)
    if path is None:
        return Directory(email_domain, opted_out=out)
    if not path.is_file():
        raise RoutingError(f"directory {str(path)!r} does not exist (alerts.directory)")
    try:
        if path.suffix.lower() == ".toml":
            return _from_toml(path, email_domain, out)
        if path.suffix.lower() == ".csv":
            return _from_csv(path, email_domain, out)
    except UnicodeDecodeError as exc:
        raise RoutingError(
            f"directory {str(path)!r} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
            "save it as UTF-8"
        ) from None
    raise RoutingError(f"directory {str(path)!r}: expected a .toml or .csv file")
