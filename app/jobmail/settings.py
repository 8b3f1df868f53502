"""The `[mail]` configuration section: the site's mailer `gpuledger mail` hands each mail to."""

from __future__ import annotations

from dataclasses import dataclass

from app.config import positive_at_most_a_year, register_section, setting

__all__ = ["MailConfig"]


def _program(v: str) -> str | None:
    return None if v.strip() else "expected the path of a mail program, e.g. /usr/bin/mail"


@register_section("mail")
@dataclass(frozen=True, slots=True)
class MailConfig:
    """How `gpuledger mail` (Slurm's MailProg) sends the mail it was given."""

    mailer: str = setting(
        "/usr/bin/mail",
        "The site's mailer, called as Slurm calls MailProg: `mailer -s SUBJECT USER…`, the "
        "body on stdin (Slurm's own default MailProg is /bin/mail).",
        _program,
    )
    report_timeout_s: float = setting(
        60.0,
        "Longest wait for the job's report; after it the mail goes out without one (Slurm "
        "stops a MailProg after 120 s).",
        positive_at_most_a_year,
    )
