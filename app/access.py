"""Who sees what on the dashboard: managers see every job, anyone else only their own.

Pure: takes the configured policy, the signed-in identity (the OIDC ID token's claims, as
Streamlit's `st.user` or a reverse proxy hands them over) and the time now, and returns the
viewer, whose `user_filter` every job query binds as `$viewer`, or a `Denied` saying why not.
No Streamlit here.

Trust rules, in order (each one refuses with a reason):

1. the token has not expired: its `exp` claim (required in an ID token) is after `now`;
2. the issuer (`iss`) is one of `allowed_issuers`, when that is set;
3. `email_verified`, when the provider sends it, is true;
4. the e-mail's domain is one of `allowed_domains`, when that is set;
5. the person maps to a scheduler user: by their full e-mail address on the `users` map
   (`alice.smith@corp.example=asmith`), else by the configured `user_claim` (e.g.
   `preferred_username`, trusted because the issuer is), else by the local part of an e-mail
   whose domain is allowed (or whose issuer is allowed, when no domain list is set).

With sign-in required (`managers` set) and none of `allowed_domains`, `allowed_issuers` and
`users` configured, nobody gets in: an identity provider that takes outside accounts would
otherwise turn `boss@gmail.com` into the manager `boss`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "AccessPolicy",
    "Denied",
    "Viewer",
    "policy_problem",
    "resolve_remote_user",
    "resolve_viewer",
    "user_name_from_claims",
]


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """How signed-in identities are trusted and mapped; no managers = open access.

    managers: lower-case user names or e-mail addresses who see every job.
    allowed_domains: lower-case e-mail domains whose people may sign in (`corp.example`).
    allowed_issuers: OIDC issuers (`iss`) whose tokens are trusted, exactly as the provider
        writes them (`https://login.corp.example/realms/hpc`).
    users: lower-case e-mail address → scheduler user name, for those whose e-mail's local part
        is not their user name; a listed address may sign in whatever its domain.
    user_claim: the claim whose value is the scheduler user name (`preferred_username`, `uid`),
        instead of the e-mail's local part; None: from the e-mail.
    """

    managers: frozenset[str] = frozenset()
    allowed_domains: frozenset[str] = frozenset()
    allowed_issuers: frozenset[str] = frozenset()
    users: Mapping[str, str] | None = None
    user_claim: str | None = None

    @property
    def restricted(self) -> bool:
        """Whether sign-in is required and non-managers see only their own jobs."""
        return bool(self.managers)

    @property
    def anchored(self) -> bool:
        """Whether anything says whose sign-in to trust (a domain, an issuer or a user map)."""
        return bool(self.allowed_domains or self.allowed_issuers or self.users)


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


@dataclass(frozen=True, slots=True)
class Denied:
    """A signed-in identity the policy refuses, and why (one sentence, safe to show them)."""

    reason: str


def policy_problem(policy: AccessPolicy) -> str | None:
    """Why this policy lets nobody in (one line naming the keys to set), or None when it can."""
    if policy.restricted and not policy.anchored:
        return (
            "dashboard.managers is set (sign-in required) but none of dashboard.allowed_domains, "
            "dashboard.allowed_issuers, dashboard.users is, so every sign-in is refused: set "
            "the e-mail domain(s) or the issuer your identity provider signs for"
        )
    return None


def user_name_from_claims(claims: Mapping[str, object]) -> str | None:
    """The scheduler user name an identity names itself: `preferred_username`, else the local
    part of `email` (`alice@example.org` → `alice`), lower-cased; None when neither is there.

    Only a hint: it trusts nothing. `resolve_viewer` decides who a signed-in person is.
    """
    for claim in ("preferred_username", "email"):
        value = _text(claims, claim)
        if value:
            return value.split("@", 1)[0]
    return None


def _text(claims: Mapping[str, object], claim: str) -> str | None:
    value = claims.get(claim)
    if isinstance(value, str) and value.strip():
        return value.strip().lower()
    return None


def _expiry(claims: Mapping[str, object]) -> float | None:
    value = claims.get("exp")
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            return None
        return parsed if math.isfinite(parsed) else None
    return None


def _verified(claims: Mapping[str, object]) -> bool:
    if "email_verified" not in claims:
        return True  # providers that only hand out verified addresses do not send it
    value = claims["email_verified"]
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _issuer_ok(policy: AccessPolicy, issuer: str | None) -> bool:
    if not policy.allowed_issuers:
        return True
    return issuer is not None and issuer.rstrip("/") in {
        i.rstrip("/") for i in policy.allowed_issuers
    }


def resolve_viewer(
    policy: AccessPolicy, claims: Mapping[str, object] | None, now: dt.datetime
) -> Viewer | Denied | None:
    """The viewer for these claims at `now`; None when access is restricted and nobody signed
    in; `Denied` (with the reason) when someone signed in whom the policy does not trust.

    With an open policy everyone is a manager. Otherwise the trust rules of this module's
    docstring apply, then a person is a manager when their user name or verified e-mail
    address is on `managers`.
    """
    if not policy.restricted:
        return Viewer(user=None, is_manager=True)
    if not claims:
        return None
    problem = policy_problem(policy)
    if problem is not None:
        return Denied("Sign-in is not set up for this dashboard yet: ask its operator.")
    expiry = _expiry(claims)
    if expiry is None:
        return Denied("Your sign-in carries no expiry time: sign in again.")
    if now.timestamp() >= expiry:
        return Denied("Your sign-in has expired: sign in again.")
    raw_issuer = claims.get("iss")
    issuer = raw_issuer.strip() if isinstance(raw_issuer, str) else None
    if not _issuer_ok(policy, issuer):
        return Denied(f"Sign-ins from {issuer or 'an unnamed issuer'} are not accepted here.")
    if not _verified(claims):
        return Denied("Your e-mail address is not verified by your identity provider.")
    email = _text(claims, "email")
    domain = email.rsplit("@", 1)[1] if email and "@" in email else None
    mapped = (policy.users or {}).get(email) if email else None
    if mapped is None and policy.allowed_domains and domain not in policy.allowed_domains:
        return Denied(f"Accounts of {domain or 'no e-mail domain'} are not accepted here.")
    if mapped is not None:
        user: str | None = mapped
    elif not (policy.allowed_domains or policy.allowed_issuers):
        return Denied("Your e-mail address is not on this dashboard's list of users.")
    elif policy.user_claim is not None:
        user = _text(claims, policy.user_claim)
        if user is None:
            return Denied(f"Your sign-in does not say your user name ({policy.user_claim}).")
    elif email is not None and domain is not None:
        user = email.split("@", 1)[0]
    else:
        return Denied("Your sign-in carries no e-mail address.")
    names = {user} | ({email} if email else set())
    return Viewer(user=user, is_manager=bool(names & policy.managers))


def resolve_remote_user(policy: AccessPolicy, remote_user: str) -> Viewer | Denied:
    """The viewer a trusted reverse proxy names (Apache's REMOTE_USER, as Open OnDemand sets
    it), mapped as sign-ins are: a bare name is the scheduler user name itself; an e-mail
    address maps through `users`, else to its local part when its domain is allowed. A manager
    is a user (or address) on `managers`; with no managers (an open dashboard) nobody is one,
    since the HTTP API is never open. The proxy has authenticated the person: no token to check.
    """
    name = remote_user.strip().lower()
    if not name or any(c.isspace() for c in name):
        return Denied("The proxy named no user.")
    if "@" not in name:
        return Viewer(user=name, is_manager=name in policy.managers)
    local, _, domain = name.rpartition("@")
    mapped = (policy.users or {}).get(name)
    if mapped is not None:
        user = mapped
    elif domain in policy.allowed_domains and local:
        user = local
    else:
        return Denied(f"Accounts of {domain or 'no e-mail domain'} are not accepted here.")
    return Viewer(user=user, is_manager=bool({user, name} & policy.managers))
