"""The API's bearer tokens: a file of `<token> <user> [manager]` lines, private to its owner.

The file is refused (one line naming it) when anyone but its owner's group may read it or
anyone but its owner may write it, when its owner is neither the account the API runs as nor
root, when a token is short, not ASCII or listed twice, or a line is not of that shape. A
line's number is named in an error, never its token. `Tokens.viewer` compares the presented
token with every listed one in constant time (hmac.compare_digest), so how long it takes says
nothing about how close a guess was.

`TokensFile` is what a running server holds: it looks at the file's status on every request
and reads it again when it changed, so a token added or revoked takes effect at once, without
a restart. A file that has become unusable (loosened mode, a broken line, removed) lets nobody
in by token until it is fixed: failing open would keep a revoked token working.
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from app.access import Viewer
from app.errors import AppError

__all__ = ["MIN_TOKEN_LENGTH", "Tokens", "TokensFile", "TokensFileError", "load_tokens"]

_log = logging.getLogger(__name__)

# Shorter tokens can be guessed: `python -c "import secrets; print(secrets.token_urlsafe(32))"`.
MIN_TOKEN_LENGTH = 16


class TokensFileError(AppError):
    """The tokens file cannot be used; the message names the file (and line), never a token."""


@dataclass(frozen=True, slots=True)
class Tokens:
    """The listed tokens, each with the viewer it stands for."""

    entries: tuple[tuple[bytes, Viewer], ...]

    def viewer(self, presented: str) -> Viewer | None:
        """The viewer whose token this is, or None. Every entry is compared, in constant time."""
        given = presented.encode("utf-8")
        found: Viewer | None = None
        for token, viewer in self.entries:
            if hmac.compare_digest(token, given):
                found = viewer
        return found

    def __repr__(self) -> str:  # never the tokens
        return f"Tokens({len(self.entries)} entries)"


def _check_mode(path: Path, euid: int | None = None) -> None:
    """Refuse a file that is not regular, not owned by this process's account (`euid`) or
    root, or that others may read or change."""
    try:
        info = path.stat()
    except OSError as exc:
        raise TokensFileError(
            f"api.tokens_file: cannot read {str(path)!r} ({exc.strerror})"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise TokensFileError(f"api.tokens_file: {str(path)!r} is not a regular file")
    account = os.geteuid() if euid is None else euid
    if info.st_uid not in (account, 0):
        # its owner could give itself a manager's token (as sshd's StrictModes refuses it)
        raise TokensFileError(
            f"api.tokens_file: {str(path)!r} is owned by uid {info.st_uid}, who could change "
            f"its tokens; it must be owned by the account the API runs as (uid {account}) or "
            "root: chown it"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IWGRP):
        raise TokensFileError(
            f"api.tokens_file: {str(path)!r} has mode {mode:04o}, so others can read or change "
            "its tokens; make it private: chmod 600"
        )


def load_tokens(path: Path, *, euid: int | None = None) -> Tokens:
    """Read and check the tokens file; TokensFileError says what is wrong, in one line.
    `euid`: the account the API runs as (default: this process's)."""
    _check_mode(path, euid)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokensFileError(f"api.tokens_file: cannot read {str(path)!r} ({exc})") from None
    entries: list[tuple[bytes, Viewer]] = []
    seen: set[bytes] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"api.tokens_file: {str(path)!r} line {number}"
        if len(fields) not in (2, 3) or (len(fields) == 3 and fields[2].lower() != "manager"):
            raise TokensFileError(f"{where}: expected '<token> <user> [manager]'")
        if not fields[0].isascii():
            # an HTTP header carries Latin-1 at best: a client sending UTF-8 never matched
            raise TokensFileError(f"{where}: the token has a character outside ASCII")
        token = fields[0].encode("utf-8")
        if len(fields[0]) < MIN_TOKEN_LENGTH:
            raise TokensFileError(
                f"{where}: the token is shorter than {MIN_TOKEN_LENGTH} characters (make one "
                "with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if token in seen:
            raise TokensFileError(f"{where}: the same token is listed on an earlier line")
        seen.add(token)
        entries.append((token, Viewer(user=fields[1].lower(), is_manager=len(fields) == 3)))
    return Tokens(tuple(entries))


def _status(path: Path) -> tuple[int, int, int, int, int] | None:
    """What changes when the file is edited, replaced or re-moded; None when it cannot be seen."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


class TokensFile:
    """The tokens file as a server holds it: re-read whenever its status changes.

    `viewer` raises TokensFileError while the file is unusable; the reason is logged once per
    change of the file (one line naming the file and line, never a token).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen = _status(path)
        self._tokens: Tokens | None = load_tokens(path)
        self._error: TokensFileError | None = None

    @classmethod
    def open(cls, path: Path) -> TokensFile:
        """Read and check the file now; TokensFileError (one line) when it is not usable."""
        return cls(path)

    def current(self) -> Tokens:
        """The tokens as the file holds them now; TokensFileError while it is unusable."""
        status = _status(self.path)
        with self._lock:
            if status != self._seen:
                self._seen = status
                try:
                    self._tokens, self._error = load_tokens(self.path), None
                    _log.info("api: re-read %s", self.path)
                except TokensFileError as exc:
                    self._tokens, self._error = None, exc
                    _log.error("%s; no token is accepted until it is fixed", exc)
            if self._error is not None:
                raise self._error
            assert self._tokens is not None
            return self._tokens

    def viewer(self, presented: str) -> Viewer | None:
        """The viewer whose token this is, or None; TokensFileError while the file is unusable."""
        return self.current().viewer(presented)

    def __repr__(self) -> str:  # never the tokens
        return f"TokensFile({str(self.path)!r})"
