"""Parse `scontrol show job -d` into which job holds which GPU (`job_gpus`, DESIGN §3.3).

Pure: text in, records out. One output may hold many jobs (one record per `JobId=` line, in the
multi-line layout or the one-line `-o` layout). With `-d` each allocated node (or group of nodes
with the same allocation) gets a line `Nodes=gpu-node01 CPU_IDs=2-3 Mem=4096
GRES=gpu:h100:4(IDX:4-7)`; the IDX list names the node's GPU ordinals → `scontrol-idx` rows.

Where no index is known (no `-d` lines, or `GRES=gpu:2` without IDX), a job that holds its
nodes exclusively (`OverSubscribe=NO`) gets one `whole-node` row per node (gpu_index null: every
GPU of the node is its). A shared job without indices gets no rows and is flagged
`unmapped_gpus`: guessing would hand its neighbours' GPUs to it. MIG slices
(`gpu:1g.10gb:1(IDX:0)`, or `gpu:a100_1g.10gb:1(IDX:0)` as AutoDetect=nvml names them) are
counted as unmapped too, since their IDX is a MIG device index and
not the GPU ordinal.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from collector.errors import MalformedSample
from collector.sources.slurm.fields import (
    MalformedLine,
    base_state,
    parse_end_ms,
    parse_gpu_tres,
    parse_timestamp_ms,
    parse_tres,
)
from collector.sources.slurm.hostlist import expand_hostlist, expand_ranges, split_top_level
from warehouse.arrow_arrays import TIMESTAMP
from warehouse.schema import RAW_TABLES

__all__ = ["HOLDING_STATES", "JobGpu", "ScontrolJob", "job_gpus_table", "parse_scontrol_show_job"]

# Job states in which a job holds its allocation (and so its GPUs).
HOLDING_STATES = frozenset(
    {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "SIGNALING", "STAGE_OUT", "STOPPED"}
)
_TOKEN = re.compile(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_/:]*)=(\S*)")
_NODE_ALLOC = re.compile(
    r"(?:^|\s)Nodes=(?P<nodes>\S+)(?P<rest>(?:\s+(?:CPU_IDs|Mem|GRES|GRES_IDX)=\S*)*)"
)
_GRES_VALUE = re.compile(r"\bGRES(?:_IDX)?=(\S*)")
_GRES_ITEM = re.compile(r"^(?P<spec>[^()]+?)(?:\(IDX:(?P<idx>[^)]*)\))?$")
# a MIG profile as a GRES type, bare (`1g.10gb`) or after the GPU's model as AutoDetect=nvml
# names it (`a100_1g.10gb`, `nvidia_h100_80gb_hbm3_3g.40gb`)
_MIG_TYPE = re.compile(r"(?:^|_)\d+g\.\d+gb$", re.IGNORECASE)
_JOB_NAME = re.compile(r"\bJobName=(.*?)(?=\s+UserId=|$)")
# The fields Slurm prints before the job's free text: JobName (the user's, spaces and all) runs
# to the record's UserId, Command, WorkDir, the comments and the std streams come after
# OverSubscribe. Only the rest is read as fields, so a name or a path cannot add one (a job
# named "x Nodes=gpu09 GRES=gpu:8(IDX:0-7)" held GPUs on gpu09).
# The largest GPU index a node can have that the contract holds (int16).
_MAX_GPU_INDEX = 32767
_USER_ID = re.compile(r"\sUserId=")
_FREE_TEXT_AFTER = re.compile(r"\s(?:Command|WorkDir|AdminComment|SystemComment|Comment|StdErr)=")


@dataclass(frozen=True, slots=True)
class JobGpu:
    """One `job_gpus` row: a job held `gpu_index` on `node` from `start_ts` (ms UTC) on."""

    job_id: str
    node: str
    gpu_index: int | None
    start_ts: int
    end_ts: int | None
    mapping: str


@dataclass(frozen=True, slots=True)
class ScontrolJob:
    """One job of `scontrol show job -d` and the GPUs it holds (empty unless it holds any)."""

    job_id: str
    job_id_raw: str
    job_name: str | None
    user: str | None  # UserId's name (`eve` of `UserId=eve(1001)`)
    state: str
    start_ts: int | None
    end_ts: int | None
    exclusive: bool
    nodes: tuple[str, ...]
    gpus: int | None
    restarts: int | None
    allocations: tuple[JobGpu, ...]
    unmapped_gpus: bool

    @property
    def holds_resources(self) -> bool:
        return base_state(self.state) in HOLDING_STATES


def _gres_items(value: str) -> list[tuple[str, str | None, str | None]]:
    """`gpu:h100:2(IDX:0,2),nic:1` → [(name, type, idx), …] (idx None when not given)."""
    items = []
    for item in split_top_level(value):
        if not item:
            continue
        match = _GRES_ITEM.match(item)
        if match is None:
            raise MalformedSample(f"invalid GRES item {item!r}")
        spec = match.group("spec").split(":")
        name = spec[0]
        gres_type = spec[1] if len(spec) >= 2 and not spec[1].isdigit() else None
        idx = match.group("idx")
        items.append((name, gres_type, None if idx in (None, "", "N/A") else idx))
    return items


def _allocations(
    job_id: str, text: str, exclusive: bool, nodes: tuple[str, ...], start: int
) -> tuple[list[JobGpu], bool]:
    """The job's GPU rows from its per-node lines, and whether some GPUs have no index."""
    rows: list[JobGpu] = []
    unindexed: list[str] = []
    unmapped = False
    matched = False
    for match in _NODE_ALLOC.finditer(text):
        matched = True
        hosts = expand_hostlist(match.group("nodes"))
        gres = _GRES_VALUE.search(match.group("rest"))
        indexed = False
        for name, gres_type, idx in _gres_items(gres.group(1) if gres else ""):
            if name != "gpu":
                continue
            if idx is None or (gres_type is not None and _MIG_TYPE.search(gres_type)):
                unmapped = True
                continue
            indexed = True
            indices = [int(i) for i in expand_ranges(idx)]
            if any(i > _MAX_GPU_INDEX for i in indices):
                raise MalformedSample(f"GPU index past {_MAX_GPU_INDEX} in {idx!r}")
            for host in hosts:
                rows.extend(JobGpu(job_id, host, i, start, None, "scontrol-idx") for i in indices)
        if not indexed:
            unindexed.extend(hosts)
    if not matched:
        unindexed = list(nodes)
    if exclusive:
        rows.extend(JobGpu(job_id, host, None, start, None, "whole-node") for host in unindexed)
        unmapped = False
    return rows, unmapped


# A line of the multi-line layout that holds one of the job's free-text fields, whole: Slurm
# prints each on its own line after the job's other fields (OverSubscribe, the `-d` lines).
_FREE_TEXT_LINE = re.compile(
    r"^(?:Command|WorkDir|AdminComment|SystemComment|Comment|StdErr|StdIn|StdOut)="
)


def _fields_text(text: str) -> str:
    """`text` without the job's free text (its name, command, directory, comments, streams):
    what the fields are read from.

    In the multi-line layout (what the collector asks for) the name is the rest of the first
    line, and the fields are the lines after it up to the first line of free text: a comment
    or a directory written `x UserId=eve(1) JobState=RUNNING Nodes=gpu09 GRES=gpu:8(IDX:0-7)`
    claimed another job's GPUs when the fields were cut at the record's last UserId. In the
    one-line layout (`-o`, hand-made input) the name runs to the first UserId after it and the
    fields to the first free-text field after that: there a name's text cannot be told from
    fields, which is why the collector asks for the multi-line layout."""
    lines = text.split("\n")
    if len(lines) > 1:
        first = lines[0]
        name_at = first.find("JobName=")
        kept = [first if name_at < 0 else first[: name_at + len("JobName=")]]
        users = [i for i, line in enumerate(lines) if i and line.startswith("UserId=")]
        if len(users) > 1:
            # a name or a comment with line breaks, holding lines that read as Slurm's own:
            # which are Slurm's cannot be told, so none is read (not the job's GPUs either)
            raise MalformedSample(
                f"{len(users)} lines start with UserId=: the job's name or free text holds "
                "lines that read as its fields; not read"
            )
        # (lines before UserId are the name's, broken over lines)
        for line in lines[users[0] if users else 1 :]:
            if _FREE_TEXT_LINE.match(line):
                break
            kept.append(line)
        return "\n".join(kept)
    return _one_line_fields(text)


def _one_line_fields(text: str) -> str:
    """`_fields_text` of a record in the one-line layout (`scontrol -o`)."""
    name_at = text.find("JobName=")
    user = _USER_ID.search(text, max(name_at, 0))
    if name_at >= 0 and user is not None:
        text = text[: name_at + len("JobName=")] + text[user.start() :]
    free = _FREE_TEXT_AFTER.search(text)
    return text if free is None else text[: free.start()]


def _parse_record(text: str, tz: dt.tzinfo) -> ScontrolJob:
    name = _JOB_NAME.search(text.split("\n", 1)[0])
    text = _fields_text(text)
    tokens = {key: value for key, value in _TOKEN.findall(text)}
    raw_id = tokens.get("JobId", "")
    if not raw_id.isdigit():
        raise MalformedSample(f"invalid JobId {raw_id!r}")
    job_id = raw_id
    if tokens.get("ArrayJobId", "").isdigit() and tokens.get("ArrayTaskId", "").isdigit():
        job_id = f"{tokens['ArrayJobId']}_{tokens['ArrayTaskId']}"
    elif tokens.get("HetJobId", "").isdigit() and tokens.get("HetJobOffset", "").isdigit():
        job_id = f"{tokens['HetJobId']}+{tokens['HetJobOffset']}"
    state = tokens.get("JobState", "")
    if not state:
        raise MalformedSample(f"job {job_id}: no JobState")
    try:
        start = parse_timestamp_ms(tokens.get("StartTime", ""), tz)
        # For a job that has not ended, EndTime is the projected end (start + limit): not used.
        end = parse_end_ms(tokens.get("EndTime", ""), start, tz)
        nodes = tuple(expand_hostlist(tokens.get("NodeList", "")))
        gpus, _ = parse_gpu_tres(parse_tres(tokens.get("TRES", "")))
    except MalformedSample as exc:
        raise MalformedSample(f"job {job_id}: {exc}") from None
    finished = base_state(state) not in HOLDING_STATES and base_state(state) != "PENDING"
    # OverSubscribe=NO is --exclusive (Slurm before 16.05 called it Shared=0).
    exclusive = tokens.get("OverSubscribe", "").upper() == "NO" or tokens.get("Shared") == "0"
    rows: list[JobGpu] = []
    unmapped = False
    if start is not None:
        try:
            rows, unmapped = _allocations(job_id, text, exclusive, nodes, start)
        except MalformedSample as exc:
            raise MalformedSample(f"job {job_id}: {exc}") from None
        if finished and end is not None:
            rows = [JobGpu(r.job_id, r.node, r.gpu_index, r.start_ts, end, r.mapping) for r in rows]
    restarts = tokens.get("Restarts", "")
    return ScontrolJob(
        job_id=job_id,
        job_id_raw=raw_id,
        job_name=name.group(1) if name else None,
        user=tokens.get("UserId", "").split("(", 1)[0] or None,
        state=state,
        start_ts=start,
        end_ts=end if finished else None,
        exclusive=exclusive,
        nodes=nodes,
        gpus=gpus if "TRES" in tokens else None,
        restarts=int(restarts) if restarts.isdigit() else None,
        allocations=tuple(rows),
        unmapped_gpus=start is not None and gpus > 0 and (unmapped or not rows),
    )


def parse_scontrol_show_job(
    text: str, *, tz: dt.tzinfo = dt.UTC
) -> tuple[list[ScontrolJob], list[MalformedLine]]:
    """Parse `scontrol show job -d` output (any number of jobs) and the records skipped.

    Each job's `allocations` are its `job_gpus` rows: `scontrol-idx` per indexed GPU, or
    `whole-node` per node for an exclusive job without indices. `end_ts` of those rows is set
    only for a job that has ended; while it runs it is null. Times are local to `tz`.
    """
    records: list[tuple[int, list[str]]] = []
    malformed: list[MalformedLine] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("JobId="):
            records.append((line_no, [stripped]))
        elif records:
            if stripped:
                records[-1][1].append(stripped)
        elif stripped and stripped != "No jobs in the system":
            malformed.append(MalformedLine("scontrol", line_no, f"text outside a job: {line!r}"))
    jobs: list[tuple[int, ScontrolJob]] = []
    for line_no, lines in records:
        try:
            jobs.append((line_no, _parse_record("\n".join(lines), tz)))
        except MalformedSample as exc:
            malformed.append(MalformedLine("scontrol", line_no, str(exc)))
    # (a job listed twice, or one sacct does not know, can come from another job's free text:
    # a line break, then `JobId=…`; the collector keeps only what sacct vouches for)
    return [job for _, job in jobs], malformed


def job_gpus_table(cluster: str, rows: Iterable[JobGpu]) -> pa.Table:
    """Build a `job_gpus` Arrow table (the contract's exact types) from rows."""
    items = list(rows)
    n = len(items)
    schema = RAW_TABLES["job_gpus"].schema
    columns = {
        "cluster": pa.array([cluster] * n, pa.string()),
        "job_id": pa.array([r.job_id for r in items], pa.string()),
        "node": pa.array([r.node for r in items], pa.string()),
        "gpu_index": pa.array([r.gpu_index for r in items], pa.int16()),
        "gpu_uuid": pa.nulls(n, pa.string()),
        "mig_instance": pa.nulls(n, pa.int16()),
        "start_ts": pa.array([r.start_ts for r in items], pa.int64()).cast(TIMESTAMP),
        "end_ts": pa.array([r.end_ts for r in items], pa.int64()).cast(TIMESTAMP),
        "mapping": pa.array([r.mapping for r in items], pa.string()),
    }
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)
