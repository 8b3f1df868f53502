"""Assemble the weekly fairness report of one cluster from the lake: every table and scalar.

Reads the `fairness_weekly` mart and the queries in sql/report/ through `warehouse.queries`;
entitlements come from the `associations` table, else from shares given on the command line,
else equal shares (and the report says which). Rendering is elsewhere (`app.report.html`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from app.report.fairshare import ROOT_ACCOUNT, Association, fair_tree, jain_index, max_min_ratio
from app.report.week import IsoWeek, default_week
from detectors.wording import counted
from warehouse import queries

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "DataWeeks",
    "ReportSettings",
    "WeeklyReport",
    "assemble_report",
    "clusters_in_lake",
    "data_weeks",
    "marts_built",
]

TREND_WEEKS = 4


@dataclass(frozen=True, slots=True)
class ReportSettings:
    """What the report is computed with (all from the command line or configuration)."""

    half_life_days: float = 7.0  # Slurm's PriorityDecayHalfLife default
    cost_per_gpu_h: float | None = None
    cost_per_kwh: float | None = None
    shares: Mapping[str, float] = field(default_factory=dict)  # fallback entitlements
    demand_min_wait_s: float = 300.0  # an account "wanted more" when its jobs queued this long
    bucket_s: int = 300  # the bucket width of a cluster with one bucket (else their spacing)
    top_n: int = 10


@dataclass(frozen=True, slots=True)
class DataWeeks:
    """The ISO weeks some clusters have data for (sorted), where their data end and begin."""

    weeks: list[IsoWeek]
    data_end: dt.datetime | None
    data_start: dt.datetime | None = None

    @property
    def span(self) -> str:
        """`2026-W45 to 2026-W46`, `2026-W45` for one week, `none` without data."""
        if not self.weeks:
            return "none"
        first, last = self.weeks[0].label, self.weeks[-1].label
        return first if first == last else f"{first} to {last}"

    def default(self, now: dt.datetime) -> IsoWeek | None:
        """The week to report without --week (`app.report.week.default_week`)."""
        return default_week(self.weeks, self.data_end, now, self.data_start)


@dataclass(frozen=True, slots=True)
class WeeklyReport:
    """Everything the report shows; `tables` are written out as CSV and Parquet too."""

    cluster: str
    week: IsoWeek
    generated: dt.datetime
    settings: ReportSettings
    has_data: bool
    share_source: str
    notes: list[str]
    scalars: dict[str, Any]
    tables: dict[str, pl.DataFrame]
    headlines: list[str] = field(default_factory=list)
    data_weeks: DataWeeks = field(default_factory=lambda: DataWeeks([], None))


def clusters_in_lake(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Clusters with any job or fairness row in the lake, sorted."""
    frame = queries.run(con, "report/clusters")
    return [str(c) for c in frame.get_column("cluster").to_list()]


def data_weeks(con: duckdb.DuckDBPyConnection, clusters: Sequence[str]) -> DataWeeks:
    """The weeks with data of any of `clusters`, the latest end of their data and the earliest
    start."""
    frame = queries.run(con, "report/data_weeks").filter(pl.col("cluster").is_in(list(clusters)))
    weeks = sorted({IsoWeek.of(d) for d in frame.get_column("week").to_list()})
    ends = [float(e) for e in frame.get_column("data_end_e").to_list() if e is not None]
    starts = [float(e) for e in frame.get_column("data_start_e").to_list() if e is not None]
    end = dt.datetime.fromtimestamp(max(ends), dt.UTC) if ends else None
    start = dt.datetime.fromtimestamp(min(starts), dt.UTC) if starts else None
    return DataWeeks(weeks, end, start)


def _coverage_note(
    week: IsoWeek, data_start: dt.datetime | None, data_end: dt.datetime | None
) -> list[str]:
    """The note on a week the data begin or end inside: the hours its figures cover (a week
    begun on a Wednesday was reported as whole, and one ended inside counted its hours from
    its Monday however late the data began)."""
    if data_end is None or data_end <= week.start or (data_start and data_start >= week.end):
        return []
    begins = data_start is not None and data_start > week.start
    ends = data_end < week.end
    if not (begins or ends):
        return []
    first = data_start if begins and data_start is not None else week.start
    hours = (min(data_end, week.end) - first).total_seconds() / 3600
    where = " and ".join(
        [f"begin {first:%a %d %b %H:%M} UTC"] * begins
        + [f"end {data_end:%a %d %b %H:%M} UTC"] * ends
    )
    queue = ", and the queue is as it stood then" if ends else ""
    return [
        f"The data {where}, inside this week: its figures cover {hours:,.0f} of its 168 "
        f"hours{queue}."
    ]


def marts_built(con: duckdb.DuckDBPyConnection) -> bool:
    """False when the lake has jobs but no `fairness_weekly` rows (attribute has not run)."""
    jobs, fairness = queries.run(con, "report/mart_status").row(0)
    return not (jobs and not fairness)


def _per_share(column: str) -> pl.Expr:
    """`column` ÷ the entitled share; null where the share is none."""
    share = pl.col("entitled_share")
    return pl.when(share > 0).then(pl.col(column) / share)


def _known_sum(column: pl.Series) -> float | None:
    """The sum of the known values of `column`; None when none is known."""
    known = column.drop_nulls()
    return float(known.sum()) if known.len() else None


def _params(cluster: str, week: IsoWeek) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "week_start_e": week.start.timestamp(),
        "week_end_e": week.end.timestamp(),
    }


def _nodes(
    assoc: pl.DataFrame,
    usage: pl.DataFrame,
    settings: ReportSettings,
    accounts_seen: list[str],
) -> tuple[list[Association], str, list[str]]:
    """The share tree with each node's decayed usage, and where the shares came from."""
    used = {
        (r["account"], r["user"]): float(r["decayed_gpu_h"] or 0.0)
        for r in usage.filter(pl.col("level") == "user").iter_rows(named=True)
    }
    users_by_account: dict[str, list[str]] = {}
    for account, user in used:
        users_by_account.setdefault(account, []).append(user)
    notes: list[str] = []
    nodes: list[Association] = []
    if not assoc.is_empty():
        source = "Slurm associations (RawShares) collected into the lake"
        known: set[tuple[str, str | None]] = set()
        for r in assoc.iter_rows(named=True):
            if r["account"] == ROOT_ACCOUNT and r["user"] is None:
                continue
            raw = float(r["raw_shares"]) if r["raw_shares"] is not None else 0.0
            key = (r["account"], r["user"])
            known.add(key)
            nodes.append(Association(r["account"], r["user"], r["parent"], raw, used.get(key, 0.0)))
        assoc_accounts = {r["account"] for r in assoc.iter_rows(named=True) if r["user"] is None}
        strays = sorted(k for k in used if k not in known)
        for account, user in strays:
            if account not in assoc_accounts:
                nodes.append(Association(account, None, None, 0.0, 0.0))
                assoc_accounts.add(account)
            nodes.append(Association(account, user, None, 0.0, used[(account, user)]))
        if strays:
            notes.append(
                f"{counted(len(strays), 'account/user pair')} used GPUs without an association "
                "in the lake; they are shown with no entitlement."
            )
        if settings.shares:
            notes.append(
                "The shares given with --share are not used: the lake holds the scheduler's "
                "own associations, which decide the entitlements."
            )
        return nodes, source, notes
    if settings.shares:
        source = "shares given with --share"
        accounts = sorted(set(settings.shares) | set(accounts_seen))
        missing = [a for a in accounts if a not in settings.shares]
        if missing:
            notes.append(f"No share given for {', '.join(missing)}: entitled to 0.")
        shares = {a: float(settings.shares.get(a, 0.0)) for a in accounts}
    else:
        source = "equal shares (no associations collected and no --share given)"
        accounts = sorted(accounts_seen)
        shares = dict.fromkeys(accounts, 1.0)
        if accounts:
            notes.append(
                "No entitlements known: every account with usage or demand is given an equal "
                "share. Collect them with `gpuledger collect slurm-shares` or pass --share."
            )
    for account in accounts:
        nodes.append(Association(account, None, None, shares[account], 0.0))
        for user in sorted(users_by_account.get(account, [])):
            nodes.append(Association(account, user, None, 1.0, used[(account, user)]))
    return nodes, source, notes


def _fairness_tables(
    this_week: pl.DataFrame,
    nodes: list[Association],
    demand: pl.DataFrame,
    settings: ReportSettings,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-account and per-user usage vs entitlement, Slurm's factors, demand."""
    shares = pl.DataFrame(
        [
            {
                "account": r.account,
                "user": r.user,
                "norm_shares": r.norm_shares,
                "entitled_share": r.entitled_share,
                "decayed_usage_share": r.norm_usage,
                "effective_usage": r.effective_usage,
                "level_fs": r.level_fs,
                "classic_factor": r.classic_factor,
                "fair_tree_factor": r.fair_tree_factor,
            }
            for r in fair_tree(nodes)
        ],
        schema={
            "account": pl.String,
            "user": pl.String,
            "norm_shares": pl.Float64,
            "entitled_share": pl.Float64,
            "decayed_usage_share": pl.Float64,
            "effective_usage": pl.Float64,
            "level_fs": pl.Float64,
            "classic_factor": pl.Float64,
            "fair_tree_factor": pl.Float64,
        },
    )
    usage_cols = [
        "account",
        "user",
        "jobs",
        "alloc_gpu_h",
        "observed_gpu_h",
        "effective_gpu_h",
        "usage_share",
        "effective_share",
        "cpu_h",
        "mem_gib_h",
        "wait_p50_s",
        "wait_p95_s",
    ]
    frames = {}
    for level in ("account", "user"):
        week_rows = this_week.filter(pl.col("level") == level).select(usage_cols)
        level_shares = shares.filter(
            pl.col("user").is_null() if level == "account" else pl.col("user").is_not_null()
        )
        joined = week_rows.join(
            level_shares, on=["account", "user"], how="full", coalesce=True, nulls_equal=True
        )
        joined = joined.with_columns(
            pl.col(c).fill_null(0.0)
            for c in (
                "alloc_gpu_h",
                "observed_gpu_h",
                "effective_gpu_h",
                "usage_share",
                "cpu_h",
                "mem_gib_h",
            )
        ).with_columns(
            pl.col("jobs").fill_null(0),
            # none without a share (0 ÷ 0 was NaN, which sorts above every number: "used nan×")
            _per_share("usage_share").alias("usage_ratio"),
            _per_share("decayed_usage_share").alias("decayed_ratio"),
        )
        frames[level] = _unknown_where_unobserved(joined)
    accounts = frames["account"].drop("user", "fair_tree_factor")
    totals = accounts.select(
        pl.col("alloc_gpu_h").sum(), pl.col("cpu_h").sum(), pl.col("mem_gib_h").sum()
    ).row(0)
    accounts = accounts.join(
        demand.select("account", "jobs_pending", "pending_job_h"), on="account", how="left"
    ).with_columns(
        pl.col("jobs_pending").fill_null(0),
        pl.col("pending_job_h").fill_null(0.0),
        pl.max_horizontal(
            pl.col("alloc_gpu_h") / (totals[0] or math.inf),
            pl.col("cpu_h") / (totals[1] or math.inf),
            pl.col("mem_gib_h") / (totals[2] or math.inf),
        ).alias("dominant_share"),
    )
    accounts = accounts.with_columns(
        (pl.col("pending_job_h") * 3600.0 >= settings.demand_min_wait_s).alias("had_demand")
    ).sort("alloc_gpu_h", "account", descending=[True, False])
    users = frames["user"].sort("account", "alloc_gpu_h", "user", descending=[False, True, False])
    return accounts, users


def _nested(nodes: list[Association]) -> set[str]:
    """The accounts of the share tree under another account than the root."""
    accounts = {n.account for n in nodes if n.user is None}
    return {
        n.account
        for n in nodes
        if n.user is None and n.parent in accounts and n.parent != ROOT_ACCOUNT
    }


def _scalars(accounts: pl.DataFrame, nested: set[str]) -> dict[str, Any]:
    """The week's fairness figures over the accounts with demand and a share. Jain's index and
    the max/min ratio compare the top-level accounts: a sub-account's use and share are inside
    its parent's (an account row's shares are of its subtree), so counting both would weigh
    them twice."""
    demanding = accounts.filter(pl.col("had_demand") & pl.col("entitled_share").gt(0))
    compared = demanding.filter(~pl.col("account").is_in(sorted(nested)))
    ratios = [float(v) for v in compared.get_column("usage_ratio").to_list() if v is not None]
    dominant = demanding.get_column("dominant_share").to_list()
    return {
        # job-hours queued in the week (a week no job ran in may still have had a queue)
        "pending_job_h": float(accounts.get_column("pending_job_h").sum()),
        "accounts_with_demand": demanding.height,
        "jain_accounts": len(ratios),
        "jain_index": jain_index(ratios),
        "max_min_ratio": max_min_ratio(ratios),
        "dominant_share_max": max(dominant) if dominant else None,
        "dominant_share_account": (
            demanding.sort("dominant_share", descending=True).get_column("account")[0]
            if demanding.height
            else None
        ),
    }


def _known_weeks(weeks: pl.DataFrame) -> set[dt.date]:
    """The Mondays of the weeks in `weeks` (fairness_weekly rows) that the cluster has data for.

    A week without rows (before the lake's first data, or a gap) is unknown, not zero; in a
    week with rows, an account without one had no usage: zero.
    """
    return set(weeks.get_column("week").to_list())


def _waste(
    weeks: pl.DataFrame, week: IsoWeek, level: str, settings: ReportSettings
) -> pl.DataFrame:
    """Waste per account (or user) this week, its cost, last week's and the mean over the
    weeks with data among the last 4 (`waste_mean_weeks` of them).

    Last week's waste and the change are null when the cluster has no data for last week.
    """
    # the weeks whose waste is known: some GPU telemetry covered them (a week of the
    # scheduler's records alone has none: its waste was taken as 0, "-X on last week")
    observed = (
        weeks.filter(pl.col("level") == "account")
        .group_by("week")
        .agg(pl.col("observed_gpu_h").sum())
        .filter(pl.col("observed_gpu_h") > 0)
    )
    measured = set(observed.get_column("week").to_list()) & _known_weeks(weeks)
    previous_known = week.minus(1).monday in measured
    mean_weeks = len(measured)
    keys = ["account"] if level == "account" else ["account", "user"]
    cols = [
        "idle_gpu_h",
        "low_eff_gpu_h",
        "failed_gpu_h",
        "unused_limit_gpu_h",
        "waste_gpu_h",
        "energy_kwh",
    ]
    rows = weeks.filter(pl.col("level") == level)
    current = rows.filter(pl.col("week") == week.monday).select(
        *keys, "alloc_gpu_h", "observed_gpu_h", *cols
    )
    previous = rows.filter(pl.col("week") == week.minus(1).monday).select(
        *keys, pl.col("waste_gpu_h").alias("waste_prev_gpu_h")
    )
    trend = (
        rows.filter(pl.col("week").is_in(sorted(measured)))
        .group_by(keys)
        .agg((pl.col("waste_gpu_h").sum() / max(mean_weeks, 1)).alias("waste_4wk_mean_gpu_h"))
    )
    prev = (
        pl.col("waste_prev_gpu_h").fill_null(0.0)
        if previous_known
        else pl.lit(None, pl.Float64).alias("waste_prev_gpu_h")
    )
    frame = (
        current.join(previous, on=keys, how="left", nulls_equal=True)
        .join(trend, on=keys, how="left", nulls_equal=True)
        .with_columns(prev, pl.lit(mean_weeks, pl.Int64).alias("waste_mean_weeks"))
        .with_columns(
            (pl.col("waste_gpu_h") - pl.col("waste_prev_gpu_h")).alias("waste_change_gpu_h"),
            (
                pl.col("waste_gpu_h") * settings.cost_per_gpu_h
                if settings.cost_per_gpu_h is not None
                else pl.lit(None, pl.Float64)
            ).alias("waste_cost"),
            (
                pl.col("energy_kwh") * settings.cost_per_kwh
                if settings.cost_per_kwh is not None
                else pl.lit(None, pl.Float64)
            ).alias("energy_cost"),
        )
        .filter(pl.col("alloc_gpu_h") > 0)
        .pipe(_unknown_where_unobserved)
        .sort("waste_gpu_h", *keys, descending=[True] + [False] * len(keys), nulls_last=True)
    )
    return frame if level == "account" else frame.head(settings.top_n)


def _waste_trend(weeks: pl.DataFrame, week: IsoWeek) -> pl.DataFrame:
    """The cluster's waste categories for each of the last 4 weeks; `has_data` false and the
    figures null for a week the cluster has no data for (unknown, not zero)."""
    known = _known_weeks(weeks)
    mondays = [week.minus(k).monday for k in range(TREND_WEEKS - 1, -1, -1)]
    frame = pl.DataFrame(
        {"week": mondays, "has_data": [m in known for m in mondays]},
        schema={"week": pl.Date, "has_data": pl.Boolean},
    )
    sums = (
        weeks.filter(pl.col("level") == "account")
        .group_by("week")
        .agg(
            *(
                pl.col(c).sum()
                for c in (
                    "alloc_gpu_h",
                    "observed_gpu_h",
                    "idle_gpu_h",
                    "low_eff_gpu_h",
                    "failed_gpu_h",
                    "unused_limit_gpu_h",
                    "waste_gpu_h",
                )
            ),
            # energy no sample carried is unknown, not 0 kWh (fairness_weekly leaves it null)
            pl.when(pl.col("energy_kwh").is_not_null().any())
            .then(pl.col("energy_kwh").sum())
            .alias("energy_kwh"),
        )
    )
    figures = [c for c in sums.columns if c not in ("week", "energy_kwh")]
    return (
        frame.join(sums, on="week", how="left")
        .with_columns(
            pl.when(pl.col("has_data")).then(pl.col(c).fill_null(0.0)).alias(c) for c in figures
        )
        .with_columns(  # a week no GPU telemetry covers: its telemetry's figures are unknown
            pl.when(pl.col("observed_gpu_h") > 0).then(pl.col(c)).alias(c)
            for c in TELEMETRY_FIGURES
            if c in figures
        )
        .sort("week")
    )


# The figures only GPU telemetry gives (how busy the GPUs were, what they drew): unknown, not 0,
# in a week no telemetry covers (a cluster whose scheduler records alone are collected). The
# allocated, failed and unused-limit GPU-hours are the scheduler's, known either way.
TELEMETRY_FIGURES = (
    "effective_gpu_h",
    "effective_share",
    "idle_gpu_h",
    "low_eff_gpu_h",
    "waste_gpu_h",
    "waste_change_gpu_h",
    "waste_4wk_mean_gpu_h",
    "waste_cost",
    "energy_kwh",
    "energy_cost",
)


# A row's own figures that only its telemetry gives: unknown (null) where its jobs held GPUs
# that no sample saw. In a week some nodes reported and others did not, an account whose jobs
# all ran on the silent ones read "effective 0.0, waste 0.0" beside the others' measured
# figures (the 4-week mean is of other weeks too, and stays).
ROW_TELEMETRY_FIGURES = tuple(c for c in TELEMETRY_FIGURES if c != "waste_4wk_mean_gpu_h")


def _unknown_where_unobserved(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with ROW_TELEMETRY_FIGURES null on the rows that held GPUs no sample saw."""
    seen = (pl.col("observed_gpu_h") > 0) | (pl.col("alloc_gpu_h") <= 0)
    return frame.with_columns(
        pl.when(seen).then(pl.col(c)).alias(c) for c in ROW_TELEMETRY_FIGURES if c in frame.columns
    )


def _unknown_telemetry(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its TELEMETRY_FIGURES columns null (unknown)."""
    return frame.with_columns(
        pl.lit(None, dtype=frame.schema[c]).alias(c)
        for c in TELEMETRY_FIGURES
        if c in frame.columns
    )


def _headlines(
    tables: dict[str, pl.DataFrame],
    scalars: dict[str, Any],
    settings: ReportSettings,
    week: IsoWeek,
) -> list[str]:
    """A few plain sentences for the top of the page: who is over or under share, waste, waits."""
    lines: list[str] = []
    wanting = tables["accounts"].filter(pl.col("had_demand") & pl.col("usage_ratio").is_not_null())
    for row in wanting.filter(pl.col("usage_ratio") > 2).iter_rows(named=True):
        lines.append(
            f"{row['account']} used {row['usage_ratio']:.1f}× its share "
            f"({row['usage_share']:.0%} of GPU-hours for a {row['entitled_share']:.0%} share)."
        )
    unentitled = tables["accounts"].filter(
        (pl.col("entitled_share") == 0) & (pl.col("usage_share") > 0)
    )
    for row in unentitled.iter_rows(named=True):
        lines.append(f"{row['account']} used {row['usage_share']:.0%} of GPU-hours with no share.")
    for row in wanting.filter(pl.col("usage_ratio") < 0.5).iter_rows(named=True):
        lines.append(
            f"{row['account']} got {row['usage_ratio']:.1f}× its share while its jobs queued "
            f"{row['pending_job_h']:.0f} job-hours: under-served."
        )
    waste = tables["waste_by_account"]
    if waste.height and (waste.get_column("waste_gpu_h")[0] or 0) > 0:
        top = waste.row(0, named=True)
        cost = f" (${top['waste_cost']:,.0f})" if settings.cost_per_gpu_h is not None else ""
        change = top["waste_change_gpu_h"]
        versus = (
            f"{change:+,.1f} on last week"
            if change is not None and not math.isnan(change)
            else f"no data for {week.minus(1).label} to compare"
        )
        lines.append(
            f"Most waste: {top['account']}, {top['waste_gpu_h']:,.1f} GPU-hours held but not "
            f"working{cost}, {versus}."
        )
    waits = tables["waits_by_size"].filter(pl.col("account") == "(all)")
    slow = waits.sort("wait_p95_s", descending=True).row(0, named=True) if waits.height else None
    if slow is not None and slow["wait_p95_s"] >= settings.demand_min_wait_s:
        # (where nobody waited, "Longest waits: 1 GPU jobs, p95 0.0 h" said nothing)
        lines.append(
            f"Longest waits: {slow['size_class']} jobs, p95 {slow['wait_p95_s'] / 3600:.1f} h "
            f"(p50 {slow['wait_p50_s'] / 3600:.1f} h)."
        )
    starving = int(tables["pending_backlog"].get_column("waiting_over_24h").sum())
    if starving:
        lines.append(
            f"{counted(starving, 'job')} still queued at {scalars['queue_at']} had waited more "
            "than 24 h."
        )
    return lines


def assemble_report(
    con: duckdb.DuckDBPyConnection,
    cluster: str,
    week: IsoWeek,
    settings: ReportSettings,
    now: dt.datetime,
) -> WeeklyReport:
    """Compute every table and scalar of the weekly report of `cluster` for `week`."""
    p = _params(cluster, week)
    weeks = queries.run(
        con,
        "report/fairness_weeks",
        cluster=cluster,
        first_week=week.minus(TREND_WEEKS - 1).monday,
        last_week=week.monday,
    )
    this_week = weeks.filter(pl.col("week") == week.monday)
    as_of = min(week.end, now).timestamp()
    usage = queries.run(
        con,
        "report/decayed_usage",
        cluster=cluster,
        as_of_e=as_of,
        half_life_s=settings.half_life_days * 86400.0,
    )
    # a week the data end inside: its queue as it stood then, not at a week end no record saw
    # (a job queued two hours before the data end was "waiting more than 24 h" at week end)
    weeks_with_data = data_weeks(con, [cluster])
    data_end = weeks_with_data.data_end
    cut = data_end is not None and data_end < week.end
    queue = {**p, "week_end_e": data_end.timestamp()} if cut and data_end else p
    demand = queries.run(con, "report/demand_by_account", **queue)
    assoc = queries.run(con, "report/associations_latest", cluster=cluster)
    seen = sorted(
        set(this_week.filter(pl.col("level") == "account").get_column("account").to_list())
        | set(usage.filter(pl.col("level") == "account").get_column("account").to_list())
        | set(demand.get_column("account").to_list())
    )
    nodes, source, notes = _nodes(assoc, usage, settings, seen)
    notes += _coverage_note(week, weeks_with_data.data_start, data_end)
    accounts, users = _fairness_tables(this_week, nodes, demand, settings)
    scalars = _scalars(accounts, _nested(nodes))
    # a week with data as docs/report.md and report/data_weeks define it: GPU-hours allocated or
    # observed, and something recorded inside it (jobs merely queued there do not count)
    has_data = week in weeks_with_data.weeks
    frame = queries.run(
        con,
        "report/cluster_frame",
        bucket_s=settings.bucket_s,
        **p,
    )
    failures = queries.run(con, "report/failures_by_cause", **p)
    energy = (
        this_week.filter(pl.col("level") == "account")
        .select("account", "energy_kwh", "alloc_gpu_h", "observed_gpu_h", "kg_co2e")
        .filter(pl.col("energy_kwh") > 0)
        .sort("energy_kwh", descending=True)
    )
    if settings.cost_per_kwh is not None:
        energy = energy.with_columns((pl.col("energy_kwh") * settings.cost_per_kwh).alias("cost"))
    fallback_jobs, fallback_hours = queries.run(con, "report/co2e_fallback", **p).row(0)
    kueue = queries.run(con, "report/kueue_queue_share", **p)
    recs = queries.run(con, "report/recommendations_weekly", **p)
    known = _known_weeks(weeks)
    tables = {
        "accounts": accounts,
        "users": users,
        "waits_by_size": queries.run(con, "report/waits_by_size", **p),
        "pending_backlog": queries.run(
            con, "report/pending_backlog", cluster=cluster, week_end_e=queue["week_end_e"]
        ),
        "waste_by_account": _waste(weeks, week, "account", settings),
        "waste_by_user": _waste(weeks, week, "user", settings),
        "waste_trend": _waste_trend(weeks, week),
        "failures_by_cause": failures,
        "energy_by_account": energy,
        "power_findings": queries.run(con, "report/power_findings", **p),
        "training_throughput": queries.run(con, "report/training_throughput", **p),
        "cluster_frame": frame,
        "recommendations": recs.filter(pl.col("covers_week")).drop("covers_week"),
        "kueue_queues": kueue,
    }
    observed = float(
        this_week.filter(pl.col("level") == "account").get_column("observed_gpu_h").sum()
    )
    # GPU-hours were allocated and no GPU telemetry covers them (the scheduler's records
    # alone): how busy the GPUs were, the waste and the energy are unknown. The page said
    # "0.0 % doing work" and "0.0 GPU-hours wasted", and ranked users by zeros.
    telemetry = observed > 0 or not float(accounts.get_column("alloc_gpu_h").sum())
    if not telemetry:
        for name in ("accounts", "users", "waste_by_account", "waste_by_user"):
            tables[name] = _unknown_telemetry(tables[name])
        notes.append(
            "No GPU telemetry covers this week's jobs: how busy the GPUs were, the waste and "
            "the energy are unknown (–); the allocated GPU-hours, failures and queue waits "
            "are the scheduler's."
        )
    scalars.update(
        {
            "telemetry": telemetry,
            "alloc_gpu_h": float(accounts.get_column("alloc_gpu_h").sum()),
            # the jobs' observed GPU-hours (a MIG instance one of its job's GPUs), which the
            # note on the two allocated figures (report/html.py) splits their difference by
            "observed_gpu_h": observed,
            "effective_gpu_h": (
                float(accounts.get_column("effective_gpu_h").sum()) if telemetry else None
            ),
            "waste_gpu_h": (
                float(tables["waste_by_account"].get_column("waste_gpu_h").sum())
                if telemetry
                else None
            ),
            "energy_kwh": (
                _known_sum(tables["waste_by_account"].get_column("energy_kwh"))
                if telemetry
                else None
            ),
            # null when no account's emissions are known (no intensity configured), never 0
            "kg_co2e": _known_sum(energy.get_column("kg_co2e")),
            "co2e_fallback_jobs": int(fallback_jobs),
            "co2e_fallback_hours": int(fallback_hours),
            "gpu_h_lost": float(failures.get_column("gpu_h_lost").sum()),
            "jobs_pending_at_end": int(tables["pending_backlog"].get_column("jobs_pending").sum()),
            # where the queue was taken: the week's end, or the data's inside the week
            "queue_at": "the end of the data" if cut else "week end",
            "half_life_days": settings.half_life_days,
            "trend_weeks_with_data": len(known),
            "trend_first_week": week.minus(TREND_WEEKS - 1),
            "previous_week": week.minus(1),
            "previous_week_has_data": week.minus(1).monday in known,
            "recommendations_stored": recs.height,
            "recommendations_made_last": (
                recs.get_column("created_ts").max() if recs.height else None
            ),
            "recommendations_evidence_from": recs.get_column("evidence_from").min(),
            "recommendations_evidence_until": recs.get_column("evidence_until").max(),
        }
    )
    return WeeklyReport(
        headlines=_headlines(tables, scalars, settings, week),
        cluster=cluster,
        week=week,
        generated=now,
        settings=settings,
        has_data=has_data,
        share_source=source,
        notes=notes,
        scalars=scalars,
        tables=tables,
        data_weeks=weeks_with_data,
    )
