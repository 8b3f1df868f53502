"""Small simulated lakes for the dashboard tests, with hand-made findings, recommendations
and fairness rows added on top (the detectors and the weekly mart land those elsewhere)."""

from __future__ import annotations

from pathlib import Path

from collector.sim import SimConfig, simulate
from tests.dashboard.factories import (
    make_fairness_row,
    make_finding,
    make_recommendation,
    write_fairness,
    write_rows,
)
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect
from warehouse.lake import Lake


def make_sim_lake(root: Path, gpus: int = 16, days: int = 2, seed: int = 5) -> Path:
    """A simulated, attributed lake (cluster 'sim')."""
    simulate(SimConfig(gpus=gpus, days=days, seed=seed), Lake.at(root))
    attribute(connect(root), root, AttributionConfig())
    return root


def add_findings_and_more(root: Path) -> dict[str, str]:
    """Add findings on the lake's most wasteful job and a node, two recommendations and a
    week of fairness rows; return the names used (job, user, node)."""
    con = connect(root)
    job_id, user, account = con.sql(
        "SELECT job_id, user, account FROM job_usage WHERE user IS NOT NULL "
        "ORDER BY idle_gpu_h DESC, job_id LIMIT 1"
    ).fetchall()[0]
    node, gpu_uuid = con.sql(
        "SELECT node, gpu_uuid FROM gpus ORDER BY node, gpu_index LIMIT 1"
    ).fetchall()[0]
    accounts = [
        str(a)
        for (a,) in con.sql(
            "SELECT DISTINCT account FROM job_usage WHERE account IS NOT NULL ORDER BY account"
        ).fetchall()
    ]
    findings = [
        make_finding(
            "f-idle",
            detector="idle_job",
            job_id=job_id,
            user=user,
            account=account,
            gpu_h_at_stake=6.5,
            message=f"Job {job_id} held its GPUs idle",
        ),
        make_finding(
            "f-hung",
            detector="hung_job",
            severity="critical",
            job_id=job_id,
            user=user,
            account=account,
            end_h=None,
            message="GPU_UTIL 100 % with SM activity ~0",
        ),
        make_finding(
            "f-risk",
            detector="failing_gpu",
            severity="warn",
            subject_kind="gpu",
            node=node,
            gpu_uuid=gpu_uuid,
            predicted=True,
            score=0.85,
            gpu_h_at_stake=8.0,
            message="Corrected ECC errors rising",
        ),
        make_finding(
            "f-other",
            detector="low_efficiency",
            severity="info",
            subject_kind="user",
            user="somebody-else",
            account="other",
            message="Low efficiency over the week",
        ),
    ]
    write_rows(root, "findings", findings, "handmade")
    recs = [
        make_recommendation("r-idle", gain=42.0),
        make_recommendation(
            "r-drain",
            kind="drain_node",
            scope=f"node={node}",
            gain=8.0,
            config=f"scontrol update NodeName={node} State=DRAIN Reason=failing-gpu",
        ),
    ]
    write_rows(root, "recommendations", recs, "handmade")
    entitled = 1 / len(accounts) if accounts else 1.0
    used = [0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02]
    write_fairness(
        root,
        [make_fairness_row(a, used[i % len(used)], entitled) for i, a in enumerate(accounts)]
        + [make_fairness_row(account, 0.1, entitled, user=user)],
    )
    return {"job_id": job_id, "user": user, "account": account, "node": node}
