"""The API's bearer tokens: a file of `<token> <user> [manager]` lines, private to its owner.

The file is refused (one line naming it) when anyone but its owner's group may read it or
anyone but its owner may write it, when a token is short or listed twice, or a line is not of
that shape. A line's number is named in an error, never its token. `Tokens.viewer` compares
the presented token with every listed one in constant time (hmac.compare_digest), so how long
it takes says nothing about how close a guess was.
"""

from __future__ import annotations

import hmac
import stat
from dataclasses import dataclass
from pathlib import Path

from app.access import Viewer
from app.errors import AppError

__all__ = ["MIN_TOKEN_LENGTH", "Tokens", "TokensFileError", "load_tokens"]

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


def _check_mode(path: Path) -> None:
    try:
        info = path.stat()
    except OSError as exc:
        raise TokensFileError(
            f"api.tokens_file: cannot read {str(path)!r} ({exc.strerror})"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise TokensFileError(f"api.tokens_file: {str(path)!r} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IWGRP):
        raise TokensFileError(
            f"api.tokens_file: {str(path)!r} has mode {mode:04o}, so others can read or change "
            "its tokens; make it private: chmod 600"
        )


def load_tokens(path: Path) -> Tokens:
    """Read and check the tokens file; TokensFileError says what is wrong, in one line."""
    _check_mode(path)
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
