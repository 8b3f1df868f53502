"""The recommenders run over a lake: `recommend(con, config, now)` replays the lake's history
per cluster and returns every kind's rows of the `recommendations` table (DESIGN §3.5), each
with its replayed effect (the Policy lab's Slurm or Kueue replay)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from detectors.recommend import (
    billing,
    drain_node,
    fairshare,
    gpu_cap,
    idle_cancel,
    mig_packing,
    power_cap,
    time_limit,
)
from detectors.recommend.config import KIND_FIELDS, RecommendConfig
from detectors.recommend.recommendation import ClusterFacts, Recommendation, to_table
from detectors.recommend.replayed import with_replayed_deltas
from detectors.recommend.replayed_kueue import with_kueue_replayed_deltas
from detectors.rules.base import EPOCH
from warehouse import queries

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = ["KINDS", "cluster_facts", "recommend"]

FACTS_QUERY = "recommend/cluster_facts"
LATEST_QUERY = "recommend/latest_activity"
DATA_END_QUERY = "recommend/data_end"

# The recommenders in the order they run (config.KIND_FIELDS's, which a test holds to this).
_RECOMMENDERS = (
    idle_cancel,
    time_limit,
    gpu_cap,
    fairshare,
    billing,
    mig_packing,
    drain_node,
    power_cap,
)
# kind -> (recommender, the part of RecommendConfig it reads)
KINDS: dict[str, tuple[Callable[..., list[Recommendation]], Callable[[RecommendConfig], Any]]] = {
    module.KIND: (module.recommend, attrgetter(KIND_FIELDS[module.KIND]))
    for module in _RECOMMENDERS
}


def cluster_facts(
    con: duckdb.DuckDBPyConnection, since: dt.datetime, until: dt.datetime
) -> list[ClusterFacts]:
    """Every cluster with jobs started in [since, until): its target scheduler and GPU count."""
    frame = queries.run(con, FACTS_QUERY, since=since, until=until)
    return [
        ClusterFacts(
            cluster=row["cluster"],
            target=row["target"],
            gpus_total=int(row["gpus_total"]),
            window_start=since,
            window_end=until,
            data_start_e=float(row["data_start_e"]),
            data_end_e=float(row["data_end_e"]),
        )
        for row in frame.iter_rows(named=True)
    ]


def recommend(
    con: duckdb.DuckDBPyConnection,
    config: RecommendConfig | None = None,
    now: dt.datetime | None = None,
    kinds: tuple[str, ...] | None = None,
) -> pa.Table:
    """Replay `lookback_days` of history and return every recommendation as table rows.

    The window ends at `now` (default: just after the end of the lake's data, never the wall
    clock, so a lake gives the same recommendations whenever it is read) and reaches back from
    the last job start or end the lake holds before `now`; `kinds` limits the run to some
    recommenders.
    """
    config = config or RecommendConfig()
    if now is None:
        end = queries.run(con, DATA_END_QUERY)["data_end"][0]
        # just after it: the window's end is exclusive, a job starting at the very end counts
        now = (end or EPOCH) + dt.timedelta(seconds=1)
    # judge each cluster as of its own end: its window reaches back from its last job (one
    # window for the lake, from its newest cluster's, left an older cluster's data out)
    latest = queries.run(con, LATEST_QUERY, now=now)
    since_of = {
        str(row["cluster"]): min(row["latest_ts"] or now, now)
        - dt.timedelta(days=config.lookback_days)
        for row in latest.iter_rows(named=True)
    }
    # (one query per distinct window start, usually one; each cluster's facts from its own)
    by_start = {since: cluster_facts(con, since, now) for since in set(since_of.values())}
    recs: list[Recommendation] = []
    for facts in sorted(
        (f for since, found in by_start.items() for f in found if since_of.get(f.cluster) == since),
        key=lambda f: f.cluster,
    ):
        # the span the replayed data cover (not the lookback window, nor the run's clock):
        # the report shows a recommendation for the weeks this span overlaps
        window = {
            "replayed_from": dt.datetime.fromtimestamp(facts.data_start_e, dt.UTC),
            "replayed_until": dt.datetime.fromtimestamp(facts.data_end_e, dt.UTC),
        }
        mine: list[Recommendation] = []
        for kind, (run, part) in KINDS.items():
            if kinds is None or kind in kinds:
                mine.extend(
                    replace(rec, evidence={**rec.evidence, **window})
                    for rec in run(con, facts, part(config))
                )
        # the Policy lab's replay: Slurm's, or Kueue's for a Kubernetes cluster
        if facts.target == "kueue":
            recs.extend(with_kueue_replayed_deltas(con, facts, mine))
        else:
            recs.extend(with_replayed_deltas(con, facts, mine))
    return to_table(recs, now)
