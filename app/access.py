"""Who sees what on the dashboard: managers see every job, anyone else only their own.

Pure: takes the configured policy and the signed-in identity (from OIDC claims) and returns
the viewer, whose `user_filter` every job query binds as `$viewer`. No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AccessPolicy", "Viewer", "resolve_viewer", "user_name_from_claims"]


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The managers' allow-list (lower-case user names or e-mail addresses); empty = open."""

    managers: frozenset[str] = frozenset()

    @property
    def restricted(self) -> bool:
        """Whether sign-in is required and non-managers see only their own jobs."""
        return bool(self.managers)


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking: their scheduler user name (None when access is open) and their role."""

    user: str | None
    is_manager: bool

    @property
    def user_filter(self) -> str | None:
        """The `$viewer` value of job queries: None (every job) for managers, else the user."""
        return None if self.is_manager else self.user

    @property
    def label(self) -> str:
        if self.user is None:
            return "open access"
        return f"{self.user} ({'manager' if self.is_manager else 'own jobs only'})"


def user_name_from_claims(claims: Mapping[str, object]) -> str | None:
    """The scheduler user name an OIDC identity stands for.

    `preferred_username` when the provider sends one, else the local part of `email`
    (`alice@example.org` → `alice`), lower-cased; None when neither is there.
    """
    for claim in ("preferred_username", "email"):
        value = claims.get(claim)
        if isinstance(value, str) and value.strip():
            return value.strip().split("@", 1)[0].lower()
    return None


def resolve_viewer(policy: AccessPolicy, claims: Mapping[str, object] | None) -> Viewer | None:
    """The viewer for these claims, or None when access is restricted and nobody signed in.

    With an open policy everyone is a manager. Otherwise a signed-in user is a manager when
    their user name or e-mail address is on the allow-list.
    """
    if not policy.restricted:
        return Viewer(user=None, is_manager=True)
    if not claims:
        return None
    user = user_name_from_claims(claims)
    if user is None:
        return None
    email = claims.get("email")
    names = {user} | ({email.strip().lower()} if isinstance(email, str) else set())
    return Viewer(user=user, is_manager=bool(names & policy.managers))
