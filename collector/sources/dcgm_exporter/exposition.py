"""Parse Prometheus text exposition as dcgm-exporter writes it into `gpu_samples` rows.

Line by line and never raising on bad input: a malformed line, an unparseable value or an
unknown metric is skipped and counted by reason, and the rest of the scrape still lands
(reference/dcgm.md §7.11). Regexes are compiled once and cannot backtrack badly: a label value
is matched by the unrolled `[^"\\]*(?:\\.[^"\\]*)*`, linear in the line's length.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from collector.errors import ConfigError
from collector.sources.dcgm_exporter.fields import FIELDS, Series, identify, read_number, scale
from collector.sources.dcgm_exporter.rows import WideRows, to_ms

__all__ = ["EXAMPLES_PER_REASON", "ParseResult", "parse_exposition"]

EXAMPLES_PER_REASON: Final = 3
_EXAMPLE_CHARS: Final = 160
_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL: Final = re.compile(
    r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"\\]*(?:\\.[^"\\]*)*)"[ \t]*', re.DOTALL
)
_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPED: Final = {"n": "\n", "\\": "\\", '"': '"'}
_TIMESTAMP: Final = re.compile(r"-?\d{1,19}", re.ASCII)


@dataclass(frozen=True, slots=True)
class ParseResult:
    """What one exposition text yielded.

    `counts` holds skipped lines and nulled values by reason (see `parse_exposition`);
    `examples` the first few offending lines per reason, as `line N: <text>`.
    """

    samples: pa.Table  # gpu_samples
    events: pa.Table  # gpu_events (conditions present at ts; see WideRows.events)
    job_gpus: pa.Table  # job_gpus observations from hpc_job / pod labels
    counts: dict[str, int]
    examples: dict[str, list[str]]
    lines: int  # sample lines read (not comments or blank lines)


class _Malformed(Exception):
    """Internal: the line's structure is broken (never escapes this module)."""


def _unescape(raw: str) -> str:
    # Prometheus escapes \\, \" and \n in label values; other escapes are kept as written.
    if "\\" not in raw:
        return raw
    return _ESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(0)), raw)


def _parse_block(block: str) -> dict[str, str]:
    """The labels of one `{...}` block, which must end exactly at its last `}`; or _Malformed."""
    labels: dict[str, str] = {}
    pos, end = 1, len(block)
    while True:
        while pos < end and block[pos] in " \t":
            pos += 1
        if pos < end and block[pos] == "}":
            pos += 1
            break
        pair = _LABEL.match(block, pos)
        if pair is None or pair.group(1) in labels:
            raise _Malformed("malformed_labels")
        labels[pair.group(1)] = _unescape(pair.group(2))
        pos = pair.end()
        if pos < end and block[pos] == ",":
            pos += 1
        elif pos < end and block[pos] == "}":
            pos += 1
            break
        else:
            raise _Malformed("malformed_labels")
    if pos != end:  # a `}` after the label set, e.g. in a trailing token
        raise _Malformed("malformed_labels")
    return labels


def parse_exposition(
    text: str,
    *,
    cluster: str,
    ts: dt.datetime,
    interval_s: float,
    source: str,
    default_node: str | None = None,
) -> ParseResult:
    """Parse one scrape of dcgm-exporter's /metrics into wide `gpu_samples` rows at `ts`.

    One row per (UUID, GPU_I_ID), or on a GPU shared by several jobs (distinct `hpc_job` labels
    or pods) one per sharer, with `job_id` set to it (`dcgm_exporter.rows.WideRows`); `hpc_job`/pod
    labels become `job_gpus` observations. Exposition timestamps are checked but the row takes
    the scrape time `ts`. `default_node` names the node when a series has no host label.

    Reasons counted (the line is skipped): `malformed_line`, `malformed_labels`,
    `missing_value`, `unknown_metric`, `no_gpu_uuid`, `no_node`; and (the value is null; a
    known metric still records its GPU): `conversion_error`, `sentinel`, `not_finite`,
    `not_a_number`, `out_of_range`, `zero_means_unsupported`; `conflicting_duplicate` counts
    copies of one GPU's value that disagree with the one kept on their row (the first).
    """
    if ts.tzinfo is None:
        raise ConfigError(f"scrape time {ts!r} has no time zone; expected an aware UTC datetime")
    ts_ms = to_ms(ts)
    rows = WideRows(cluster=cluster, interval_s=interval_s, source=source)
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    lines = 0

    def skip(reason: str, line_no: int, line: str) -> None:
        counts[reason] += 1
        held = examples.setdefault(reason, [])
        if len(held) < EXAMPLES_PER_REASON:
            if len(line) > _EXAMPLE_CHARS:  # keep both ends: the value is at the end
                line = f"{line[: _EXAMPLE_CHARS - 60]} … {line[-50:]}"
            held.append(f"line {line_no}: {line}")

    # dcgm-exporter repeats one label set on every metric of a GPU: parse each set once.
    blocks: dict[str, Series | str] = {}
    no_labels = identify({}, default_node)
    for line_no, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.strip(" \t\r")
        if not line or line[0] == "#":
            continue  # blank, HELP, TYPE or comment
        lines += 1
        match = _NAME.match(line)
        if match is None:
            skip("malformed_line", line_no, line)
            continue
        name, pos = match.group(), match.end()
        if pos < len(line) and line[pos] == "{":
            # a valid value or timestamp never holds a `}`, so the set ends at the last one
            close = line.rfind("}") + 1
            block = line[pos:close]
            series = blocks.get(block)
            if series is None:
                try:
                    series = identify(_parse_block(block), default_node)
                except _Malformed as exc:
                    series = str(exc)
                blocks[block] = series
            if series == "malformed_labels":
                skip(series, line_no, line)
                continue
            tokens = line[close:].split()
        elif pos < len(line) and line[pos] not in " \t":
            skip("malformed_line", line_no, line)
            continue
        else:
            series, tokens = no_labels, line[pos:].split()
        if not tokens:
            skip("missing_value", line_no, line)
            continue
        number = read_number(tokens[0])
        if isinstance(number, str) and len(tokens) > 1:
            number = read_number(" ".join(tokens))  # e.g. `ERROR - FAILED TO CONVERT TO STRING`
        elif not isinstance(number, str) and len(tokens) > 1:
            if len(tokens) > 2 or not _TIMESTAMP.fullmatch(tokens[1]):
                skip("malformed_line", line_no, line)  # trailing garbage after the value
                continue
        spec = FIELDS.get(name)
        if isinstance(number, str):
            skip(number, line_no, line)
            if spec is not None and not isinstance(series, str):
                rows.add(ts_ms, series, None, None)  # the GPU was reported, its value is not
            continue
        if spec is None:
            skip("unknown_metric", line_no, line)
            continue
        if isinstance(series, str):
            skip(series, line_no, line)  # no_gpu_uuid, no_node, malformed GPU_I_ID
            continue
        cell = scale(spec, number)
        if cell.reason is not None:
            skip(cell.reason, line_no, line)
        rows.add(ts_ms, series, spec.column, cell.value)

    counts.update(rows.counts)
    return ParseResult(
        samples=rows.samples(),
        events=rows.events(),
        job_gpus=rows.job_gpus(),
        counts=dict(sorted(counts.items())),
        examples=examples,
        lines=lines,
    )
