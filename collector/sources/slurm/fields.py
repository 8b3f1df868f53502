"""Parse single field values that Slurm's `sacct` and `scontrol` print.

Times are printed in the local time of the process that ran the command (its `TZ`); the caller
says which zone that was and gets epoch milliseconds UTC back. Every parser returns None for
Slurm's "no value" words (`Unknown`, `None`, `UNLIMITED`, …) and raises `MalformedSample` for
text that is neither a value nor such a word.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from collector.errors import MalformedSample

__all__ = [
    "MalformedLine",
    "base_state",
    "parse_duration_s",
    "parse_end_ms",
    "parse_gpu_tres",
    "parse_req_mem",
    "parse_size_mib",
    "parse_time_limit_s",
    "parse_timestamp_ms",
    "parse_tres",
]

_NO_TIME = frozenset({"", "unknown", "none", "n/a", "(null)", "invalid"})
_NO_LIMIT = frozenset({"", "unlimited", "partition_limit", "infinite", "invalid", "none", "n/a"})
_TIMESTAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2}))?$")
_DURATION = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+(?:\.\d+)?))?$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTPE]?)(B?)$", re.IGNORECASE)
_MIB_PER_UNIT = {
    "": None,  # the caller's bare unit
    "K": 1 / 1024,
    "M": 1.0,
    "G": 1024.0,
    "T": 1024.0**2,
    "P": 1024.0**3,
    "E": 1024.0**4,
}
_BARE_UNIT_MIB = {"B": 1 / 1024**2, "K": 1 / 1024, "M": 1.0, "G": 1024.0}


@dataclass(frozen=True, slots=True)
class MalformedLine:
    """One input line that was skipped: which command printed it, where, and why."""

    source: str
    line_no: int
    reason: str

    def __str__(self) -> str:
        return f"{self.source} line {self.line_no}: {self.reason}"


def parse_timestamp_ms(text: str, tz: dt.tzinfo = dt.UTC, *, fold: int = 0) -> int | None:
    """`2026-12-02T13:01:09` in zone `tz` → epoch milliseconds UTC; `Unknown`/`None` → None.

    An all-digits value is taken as epoch seconds (what `SLURM_TIME_FORMAT=%s` prints). A local
    time the clock shows twice (the hour repeated when daylight saving time ends) is its first
    occurrence, or its second with `fold=1`.
    """
    raw = text.strip()
    if raw.lower() in _NO_TIME:
        return None
    if raw.isdigit():
        return int(raw) * 1000 if int(raw) > 0 else None
    match = _TIMESTAMP.match(raw)
    if match is None:
        raise MalformedSample(f"invalid time {raw!r}; expected YYYY-MM-DDTHH:MM:SS")
    year, month, day, hour, minute, second = (int(g) if g else 0 for g in match.groups())
    try:
        local = dt.datetime(year, month, day, hour, minute, second, tzinfo=tz, fold=fold)
    except ValueError as exc:
        raise MalformedSample(f"invalid time {raw!r}: {exc}") from None
    return int(local.timestamp() * 1000)


def parse_end_ms(text: str, start_ms: int | None, tz: dt.tzinfo = dt.UTC) -> int | None:
    """An end time (as `parse_timestamp_ms`) that is not before `start_ms` where the zone allows.

    In the hour repeated when daylight saving time ends, a local time is ambiguous: a job that
    starts in its first occurrence and ends in its second (01:50 EDT to 01:30 EST, 40 minutes)
    reads as ending before it started, and would hold its GPUs for no time. Its end is then the
    second occurrence.
    """
    end = parse_timestamp_ms(text, tz)
    if end is not None and start_ms is not None and end < start_ms:
        later = parse_timestamp_ms(text, tz, fold=1)
        if later is not None and later >= start_ms:
            return later
    return end


def parse_duration_s(text: str) -> float | None:
    """`[D-]HH:MM:SS[.frac]`, `MM:SS[.frac]`, `D-HH:MM`, `D-HH` or minutes → seconds.

    Slurm's "no limit" words (`UNLIMITED`, `Partition_Limit`, …) and empty text → None.
    """
    raw = text.strip()
    if raw.lower() in _NO_LIMIT:
        return None
    match = _DURATION.match(raw)
    if match is None:
        raise MalformedSample(f"invalid duration {raw!r}; expected [D-]HH:MM:SS")
    days, first, second, third = match.groups()
    parts = [p for p in (first, second, third) if p is not None]
    if "." in "".join(parts[:-1]):
        raise MalformedSample(f"invalid duration {raw!r}; only seconds may have a fraction")
    values = [float(p) for p in parts]
    if days is not None:
        # With a day part Slurm prints D-HH, D-HH:MM or D-HH:MM:SS.
        hours, minutes, seconds = (values + [0.0, 0.0])[:3]
    elif len(values) == 3:
        hours, minutes, seconds = values
    elif len(values) == 2:
        hours, minutes, seconds = 0.0, values[0], values[1]
    else:
        hours, minutes, seconds = 0.0, values[0], 0.0  # a bare number is minutes
    return (int(days or 0) * 24 + hours) * 3600 + minutes * 60 + seconds


def parse_time_limit_s(text: str) -> int | None:
    """A time limit in whole seconds; None means unlimited (`UNLIMITED`, `Partition_Limit`)."""
    seconds = parse_duration_s(text)
    return None if seconds is None else round(seconds)


def parse_size_mib(text: str, bare_unit: str = "M") -> float | None:
    """`4000M`, `16G`, `5.50M`, `1024K` → MiB (powers of 1024); empty → None.

    `bare_unit` says what a number without a suffix counts: Slurm prints memory requests in
    MB (`M`) and usage such as MaxRSS in bytes (`B`).
    """
    raw = text.strip()
    if raw.lower() in ("", "n/a", "none", "unknown"):
        return None
    match = _SIZE.match(raw)
    if match is None:
        raise MalformedSample(f"invalid size {raw!r}; expected a number with K/M/G/T suffix")
    value, unit = float(match.group(1)), match.group(2).upper()
    factor = _MIB_PER_UNIT[unit] if unit else _BARE_UNIT_MIB[bare_unit]
    assert factor is not None
    return value * factor


def parse_req_mem(text: str) -> tuple[float | None, str]:
    """ReqMem → (MiB, per) where per is `c` (per CPU), `n` (per node) or `` (whole job).

    Slurm before 21.08 suffixed the value: `4000Mc` / `4000Mn`; later versions print `16G`.
    """
    raw = text.strip()
    per = ""
    if raw[-1:] in ("c", "n"):  # never a unit: units are K, M, G, T, P
        raw, per = raw[:-1], raw[-1]
    return parse_size_mib(raw, "M"), per


def parse_tres(text: str) -> dict[str, str]:
    """`billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,node=1` → {name: value} (values as text)."""
    raw = text.strip()
    out: dict[str, str] = {}
    if not raw:
        return out
    for item in raw.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise MalformedSample(f"invalid TRES item {item!r} in {raw!r}; expected name=value")
        out[name.strip()] = value.strip()
    return out


def _count(value: str, name: str) -> int:
    if not value.isdigit():
        raise MalformedSample(f"invalid count {value!r} for TRES {name!r}")
    return int(value)


def parse_gpu_tres(tres: dict[str, str]) -> tuple[int, str | None]:
    """Return (GPU count, GPU type(s)) from parsed TRES.

    Slurm lists the untyped total (`gres/gpu=8`) next to per-type counts (`gres/gpu:a100=4,
    gres/gpu:h100=4`): the total is used as is, never added to the typed ones. Where only typed
    counts are recorded, they are summed. Types are joined sorted with commas (`a100,h100`).
    Names that merely start with `gres/gpu` (`gres/gpumem`, `gres/gpuutil`) are not GPUs.
    """
    total: int | None = None
    typed: dict[str, int] = {}
    for name, value in tres.items():
        if name == "gres/gpu":
            total = _count(value, name)
        elif name.startswith("gres/gpu:"):
            typed[name.split(":", 1)[1]] = _count(value, name)
    count = total if total is not None else sum(typed.values())
    types = sorted(t for t, n in typed.items() if n > 0) or sorted(typed)
    return count, ",".join(types) or None


def base_state(state: str) -> str:
    """`CANCELLED by 1001` → `CANCELLED`; `RUNNING` → `RUNNING`."""
    return state.strip().split(" ", 1)[0].rstrip("+").upper()
