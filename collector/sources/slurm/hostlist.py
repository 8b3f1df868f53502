"""Expand Slurm's compressed host lists (`gpu-node[01-04,07]`) and index lists (`0,2-3`).

Pure functions: text in, a list out, `MalformedSample` on input that does not follow the grammar.
"""

from __future__ import annotations

import itertools
import math
import re

from collector.errors import MalformedSample

__all__ = ["MAX_EXPANSION", "expand_hostlist", "expand_ranges", "split_top_level"]

# A guard against a typo such as `n[1-99999999]` eating the collector's memory.
MAX_EXPANSION = 1_000_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split `text` on `sep` where it is outside brackets and parentheses.

    `a[1-2],b[3,5]` → `['a[1-2]', 'b[3,5]']`; `gpu:2(IDX:0,2),nic:1` → two items.
    """
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth < 0:
                raise MalformedSample(f"unbalanced {ch!r} in {text!r}")
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise MalformedSample(f"unbalanced brackets in {text!r}")
    parts.append(text[start:])
    return parts


def expand_ranges(text: str) -> list[str]:
    """Expand a range list such as `01-04,07` (zero padding kept from the lower bound).

    Also the grammar of GPU index lists (`IDX:0,2-3`). A step (`1-9:2`) is not Slurm host
    syntax, but array specs use it, so it is accepted; `%N` throttles are dropped.
    """
    out: list[str] = []
    for item in text.split(","):
        item = item.strip().split("%", 1)[0]
        step = 1
        if ":" in item:
            item, _, raw_step = item.partition(":")
            if not raw_step.isdigit() or int(raw_step) < 1:
                raise MalformedSample(f"invalid range step {raw_step!r} in {text!r}")
            step = int(raw_step)
        match = _RANGE.match(item)
        if match is None:
            raise MalformedSample(f"invalid range {item!r} in {text!r}")
        low, high = match.group(1), match.group(2)
        if high is None:
            out.append(low)
            continue
        if int(high) < int(low):
            raise MalformedSample(f"range {item!r} runs backwards in {text!r}")
        if (int(high) - int(low)) // step + len(out) >= MAX_EXPANSION:
            raise MalformedSample(f"range {item!r} expands to too many items")
        width = len(low) if low.startswith("0") and len(low) > 1 else 0
        out.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1, step))
    return out


def _expand_one(expr: str) -> list[str]:
    """Expand one host expression; several bracket groups give their cartesian product.

    Brackets are balanced here (`split_top_level` checked them).
    """
    pieces: list[list[str]] = []
    pos = 0
    while pos < len(expr):
        open_at = expr.find("[", pos)
        literal = expr[pos:] if open_at < 0 else expr[pos:open_at]
        if literal:
            pieces.append([literal])
        if open_at < 0:
            break
        close_at = expr.find("]", open_at)
        if close_at < 0:
            raise MalformedSample(f"unclosed '[' in host list {expr!r}")
        inner = expr[open_at + 1 : close_at]
        if not inner or "[" in inner:
            raise MalformedSample(f"invalid bracket group {inner!r} in host list {expr!r}")
        pieces.append(expand_ranges(inner))
        pos = close_at + 1
    if math.prod(len(piece) for piece in pieces) > MAX_EXPANSION:  # before building them
        raise MalformedSample(f"host list {expr[:60]!r} expands to too many hosts")
    return ["".join(combo) for combo in itertools.product(*pieces)]


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm host list into host names, in order, without duplicates.

    `gpu-node[01-04,07]` → gpu-node01 … gpu-node04, gpu-node07; `a[1-2]-ib[0-1]` → four names;
    `n1,m[3-4]` → three. Empty text and `None assigned` / `(null)` (a pending job) give `[]`.
    """
    text = text.strip()
    if text in ("", "None assigned", "(null)", "None"):
        return []
    hosts: list[str] = []
    for expr in split_top_level(text):
        expr = expr.strip()
        if not expr:
            raise MalformedSample(f"empty item in host list {text!r}")
        if any(ch.isspace() for ch in expr):
            raise MalformedSample(f"space in host list {text!r}")
        hosts.extend(_expand_one(expr))
        if len(hosts) > MAX_EXPANSION:
            raise MalformedSample(f"host list {text[:60]!r} expands to too many hosts")
    return list(dict.fromkeys(hosts))
