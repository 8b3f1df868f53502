"""What a user or account name taken from untrusted input may look like.

Pod labels and annotations are written by whoever creates the pod; a value there reaches the
lake's `jobs.user` / `jobs.account`, the dashboard, and the alerts' `<user>@<email_domain>`
addresses. One token only: letters, digits, `.`, `_`, `-` (a POSIX or LDAP login, a Kubernetes
namespace) — no spaces, commas, newlines, `@`, `<>` or quotes, so a value can never become a
second address, a header, or someone else's name with a suffix.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_NAME", "NAME_PATTERN", "valid_name"]

MAX_NAME: Final = 64
NAME_PATTERN: Final = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{MAX_NAME - 1}}}")


def valid_name(value: object) -> bool:
    """Whether `value` is one sane user or account name (see the module's rule)."""
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None
