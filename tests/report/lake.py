"""A small hand-made lake whose weekly fairness figures are worked out by hand in the tests.

T0 (tests.marts.rows) is Friday 2024-03-01 00:00 UTC, in ISO week 2024-W09 (Monday 26 Feb to
Monday 4 Mar = T0 + 3 days). Accounts: physics (3 shares; users alice, carol) and bio (1 share;
user bob).

- j1 physics/alice: 1 GPU (g001/0) over [0, 1 h), submitted 10 min before, time limit 2 h,
  4 CPUs and 8 GiB; samples every 30 s, idle the first half hour and fully busy the second, 400 W.
- j2 bio/bob: 2 GPUs (g001/1, g002/0) over [0, 30 min), submitted 1 h before, FAILED; only
  g001/1 reports, busy 0.1 (low efficiency), 2 CPUs.
- j3 physics/carol: 1 GPU (g002/0) over the week boundary, 30 min on each side, submitted 2 h
  before it started, no samples, 1 CPU.
- j4 bio/bob: 4 GPUs asked, 10 h limit, submitted 48 h before the week's end, never started.
- j1's training loop reported 1.2 M tokens over 20 minutes (1000 tokens/s) of a 1e9-parameter
  model on its H100: MFU 6 × 1e9 × 1000 ÷ 989e12 = 0.61 %.

The data therefore reach into 2024-W10 (j3's last half hour, to T0 + 3 days + 30 min): W09 is
the first week with data, W10 the last (and incomplete).

Recommendations: r1 and r3 made in W09 without an evidence window, r2 made the week after; r4
and r5 made 30 days later (as `detect` stamps them when run on a backfilled lake) with evidence
replayed over [T0 − 10 d, T0 + 30 d), which covers W09, and [T0 + 20 d, T0 + 30 d), which does
not.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.infra.lake_cache import cached_lake
from tests.marts.rows import CLUSTER, T0, at, build_lake, gpu, job, job_gpu, land, samples
from warehouse.attribution import AttributionConfig
from warehouse.connection import connect

WEEK_END_S = 3 * 86400.0  # Monday 2024-03-04 00:00, seconds after T0
HOUR = 3600.0


def build_fairness_lake(
    root: Path,
    *,
    associations: bool = True,
    recommendations: bool = True,
    config: AttributionConfig | None = None,
):
    j1_busy = [0.0 if t < 1800 else 1.0 for t in range(0, 3600, 30)]
    if associations:
        land(
            root,
            "associations",
            [
                assoc("root", None, None, None),
                assoc("physics", None, "root", 3),
                assoc("bio", None, "root", 1),
                assoc("physics", "alice", None, 1),
                assoc("physics", "carol", None, 1),
                assoc("bio", "bob", None, 1),
            ],
        )
    later = at(30 * 86400)
    land(
        root,
        "recommendations",
        [
            rec("r1", at(3600), 12.5, kind="idle_cancel_policy"),
            rec("r2", at(WEEK_END_S + 60), 99.0, kind="time_limit"),  # the next week
            rec("r3", at(7200), None, kind="power_cap") | {"evidence": '{"kwh_saved": 40.0}'},
            rec("r4", later, 50.0, kind="gpu_cap") | {"evidence": window(-10 * 86400, later)},
            rec("r5", later, 70.0, kind="gpu_cap") | {"evidence": window(20 * 86400, later)},
        ]
        if recommendations
        else [],
    )
    land(
        root,
        "findings",
        [
            finding("f1", "power_cap_candidate", 3.0) | {"evidence": '{"kwh_saved": 2.5}'},
            finding("f3", "power_cap_candidate", 1.0) | {"evidence": "not json"},
            finding("f2", "idle_gpu", 7.0),
        ],
    )
    # j1's training loop: 1.2 M tokens over [30 min, 50 min) of a 1e9-parameter model
    land(
        root,
        "app_throughput",
        [
            {"cluster": CLUSTER, "job_id": "j1", "ts": at(t), "tokens_total": tokens,
             "model_params": 1_000_000_000, "source": "test"}
            for t, tokens in ((1800, 0.0), (3000, 1.2e6))
        ],
    )  # fmt: skip
    return build_lake(
        root,
        samples=samples(range(0, 3600, 30), engine_active=j1_busy, power_w=400.0)
        + samples(range(0, 1800, 30), gpu_index=1, engine_active=0.1),
        jobs=[
            job("j1", 0, HOUR, submit_ts=at(-600), time_limit_s=7200, cpus=4, mem_req_mib=8192),
            job(
                "j2",
                0,
                HOUR / 2,
                user="bob",
                account="bio",
                gpus=2,
                state="FAILED",
                submit_ts=at(-HOUR),
                cpus=2,
            ),  # fmt: skip
            job(
                "j3",
                WEEK_END_S - 1800,
                WEEK_END_S + 1800,
                user="carol",
                cpus=1,
                submit_ts=at(WEEK_END_S - 1800 - 7200),
            ),  # fmt: skip
            job(
                "j4",
                WEEK_END_S - 48 * HOUR,
                None,
                user="bob",
                account="bio",
                state="PENDING",
                gpus=None,
                gpus_requested=4,
                time_limit_s=36000,
            )
            | {"start_ts": None},  # fmt: skip
        ],
        job_gpus=[
            job_gpu("j1", 0, HOUR),
            job_gpu("j2", 0, HOUR / 2, gpu_index=1),
            job_gpu("j2", 0, HOUR / 2, node="g002"),
            job_gpu("j3", WEEK_END_S - 1800, WEEK_END_S + 1800, node="g002"),
        ],
        gpus=[gpu(), gpu(gpu_index=1), gpu("g002")],
        config=config,
    )


def fairness_lake(
    tmp_path_factory: pytest.TempPathFactory,
    into: Path | None = None,
    *,
    associations: bool = True,
    recommendations: bool = True,
) -> duckdb.DuckDBPyConnection:
    """A connection over a copy at `into` (by default a new folder) of `build_fairness_lake`'s
    lake with the built-in attribution config: each variant is built once per test run
    (tests/infra/lake_cache.py) and every caller gets its own copy to read or write."""
    name = "fairness" + ("" if associations else "-no-associations")
    name += "" if recommendations else "-no-recommendations"

    def build(root: Path) -> None:
        con = build_fairness_lake(root, associations=associations, recommendations=recommendations)
        con.close()

    into = into if into is not None else tmp_path_factory.mktemp(name) / "lake"
    return connect(cached_lake(tmp_path_factory, name, build, into))


def assoc(account, user, parent, shares):
    return {
        "cluster": CLUSTER,
        "account": account,
        "user": user,
        "parent": parent,
        "raw_shares": shares,
        "source": "test",
        "updated_ts": T0,
    }


def rec(rec_id, created, gain, *, kind):
    return {
        "cluster": CLUSTER,
        "rec_id": rec_id,
        "kind": kind,
        "scope": "account=bio",
        "target": "slurm",
        "evidence": '{"jobs": 3}',
        "expected_gain_gpu_h": gain,
        "risk": "1 job",
        "config": "sacctmgr modify account bio set GrpTRES=gres/gpu=8",
        "created_ts": created,
    }


def window(start_s: float, until) -> str:
    """Evidence as `detect` writes it: the replayed window's ends as ISO text, keys sorted."""
    return json.dumps(
        {"jobs": 3, "replayed_from": at(start_s).isoformat(), "replayed_until": until.isoformat()},
        sort_keys=True,
    )


def finding(finding_id, detector, gpu_h):
    return {
        "cluster": CLUSTER,
        "finding_id": finding_id,
        "detector": detector,
        "severity": "warn",
        "subject_kind": "gpu",
        "subject_id": "GPU-g001-0",
        "start_ts": at(0),
        "end_ts": at(HOUR),
        "detected_ts": at(HOUR),
        "gpu_h_at_stake": gpu_h,
        "message": f"{detector} finding",
    }
