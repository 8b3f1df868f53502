"""Every recommendation kind, as `recommend` writes it on a hand-made lake, either carries the
replay's deltas or says in its evidence why it does not (`replay.not_replayed`): a power cap
does not change when jobs start, the replay models no billing, MIG slices change what jobs ask
for, and the idle-cancel policy has its own replay. The kinds are matched by the recommenders'
own names (a `fairshare_weight` recommendation once went unreplayed, the replay looking for
`fairshare`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from detectors.recommend import RecommendConfig
from detectors.recommend.config import MigPackingConfig
from detectors.recommend.replayed import NOT_REPLAYED, proposal_settings
from detectors.recommend.run import KINDS, recommend
from detectors.replay.policy import Policy, PolicyError, apply_settings
from tests.detectors.recommend import test_idle_cancel, test_mig_packing, test_power_cap
from tests.detectors.recommend.lake import NOW, recs_of
from tests.detectors.recommend.shared_lakes import shared_lake
from tests.detectors.recommend.test_fairness_recs import (
    billing_jobs,
    fairshare_jobs,
    nested_tree_lake,
)
from tests.marts import rows as r
from warehouse.connection import connect

GPUS = [r.gpu("g001", i) for i in range(8)]
MIG_FLOOR = MigPackingConfig(min_gpu_h=20)


def _jobs_lake(jobs: Callable[[], list[r.Row]]) -> Callable[[pytest.TempPathFactory], Any]:
    return lambda made: r.build_lake(made.mktemp("lake"), jobs=jobs(), gpus=GPUS)


def _shared(name: str, build: Callable[[Path], Any]) -> Callable[[pytest.TempPathFactory], Any]:
    """The lake of another file's tests, built once per run for both (its own copy here)."""
    return lambda made: shared_lake(made, name, build)


def _kind_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    assert rows, "the lake should give this kind a recommendation"
    return rows[0]


@pytest.mark.parametrize(
    ("kind", "build", "config"),
    [
        ("power_cap", _shared("power-cap", test_power_cap.lake), RecommendConfig()),
        ("gpu_billing", _jobs_lake(billing_jobs), RecommendConfig()),
        # test_mig_packing's lake has 20 GPU-h of candidates: the floor lowered to them
        (
            "mig_packing",
            _shared("mig-packing", test_mig_packing.lake),
            RecommendConfig(mig_packing=MIG_FLOOR),
        ),
        (
            "idle_cancel_policy",
            _shared("idle-cancel", test_idle_cancel.idle_lake),
            RecommendConfig(),
        ),
    ],
)
def test_a_kind_the_replay_cannot_express_says_why_in_its_evidence(
    tmp_path_factory, kind, build, config
):
    con = build(tmp_path_factory)
    rec = _kind_of(recs_of(recommend(con, config, NOW, kinds=(kind,)), kind))
    assert rec["target"] == "slurm"
    assert rec["evidence"]["replay"] == {"not_replayed": NOT_REPLAYED[kind]}


def test_the_reasons_name_what_each_change_is():
    assert "energy" in NOT_REPLAYED["power_cap"]
    assert "billing" in NOT_REPLAYED["gpu_billing"]
    assert "slice" in NOT_REPLAYED["mig_packing"]
    assert "idle" in NOT_REPLAYED["idle_cancel_policy"]
    # every kind the recommenders write is either replayable or has its reason
    replayable = {"time_limit", "gpu_cap", "fairshare_weight", "drain_node"}
    assert set(KINDS) == replayable | set(NOT_REPLAYED)
    assert not replayable & set(NOT_REPLAYED)


def test_a_fair_share_recommendation_as_written_is_replayed(tmp_path):
    con = r.build_lake(tmp_path, jobs=fairshare_jobs(), gpus=GPUS)
    table = recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",))
    rec = _kind_of(recs_of(table, "fairshare_weight"))
    rp = rec["evidence"]["replay"]
    # all three accounts flagged (test_fairness_recs): demand shares 0.8, 0.1, 0.1 move shares
    # halfway from 1/3 each, and each gets its new part of the shares the three hold (none
    # recorded: 1 each, 3 in all): physics (1/3 + 0.8) / 2 × 3 = 1.7, chem and bio 0.65
    settings = dict(s.split("=") for s in rp["settings"])
    assert settings.keys() == {"assoc.bio.Shares", "assoc.chem.Shares", "assoc.physics.Shares"}
    assert {k: float(v) for k, v in settings.items()} == pytest.approx(
        {"assoc.bio.Shares": 0.65, "assoc.chem.Shares": 0.65, "assoc.physics.Shares": 1.7}
    )
    assert rp["assumed"][0] == "priority.PriorityType=priority/multifactor"
    assert rp["jobs"] == 3 and rp["jobs_started"] == {"baseline": 3, "proposal": 3}


def test_a_node_cannot_hold_whole_gpus_beside_mig_slices_in_the_replay():
    # what mig_packing's slurm.conf line asks for (Gres=gpu:<model>:<left>,gpu:<slice>:N) is not
    # a setting the replay takes: one GPU type per node
    with pytest.raises(PolicyError, match="expected gpu:N or gpu:<type>:N"):
        apply_settings(Policy(), ["node.g001.Gres=gpu:h100:6,gpu:1g.10gb:7"])
    # and the recommendation itself gives no setting
    from detectors.recommend.recommendation import Recommendation

    mig = Recommendation(
        cluster=r.CLUSTER,
        kind="mig_packing",
        scope="cluster",
        target="slurm",
        evidence={"gpus_to_convert": 1},
        expected_gain_gpu_h=1.0,
        gain_kind="saved",
        risk="r",
        config="c",
    )
    assert proposal_settings(mig, Policy()) == ([], [])


def test_a_fair_share_change_on_a_parent_account_scales_its_sub_accounts(tmp_path):
    # test_fairness_recs' tree: root -> ml (40), research (60); ml -> ml-nlp (10), ml-vision
    # (30). The replay's shares are the leaves' parts of the tree: ml-nlp 0.4 × 0.25 = 0.1,
    # ml-vision 0.4 × 0.75 = 0.3, research 0.6
    con = nested_tree_lake(tmp_path)
    r.land(tmp_path, "gpus", GPUS)
    con = connect(tmp_path)
    top, ml = recs_of(
        recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",)), "fairshare_weight"
    )
    new = {a["account"]: a["new_share"] for a in top["evidence"]["accounts"]}
    # under root (ml 0.4 + research 0.6 = 1): ml's new part, (0.4 + 16/18) / 2, is its
    # sub-accounts' parts scaled by it ÷ 0.4; research's is its own
    scale = new["ml"] / 0.4
    assert _shares(top) == pytest.approx(
        {"ml-nlp": 0.1 * scale, "ml-vision": 0.3 * scale, "research": new["research"]},
        abs=1e-5,  # the stored evidence's shares are rounded to 6 places
    )
    assert new["ml"] == pytest.approx((0.4 + 16 / 18) / 2, abs=1e-6)
    # under ml (its sub-accounts hold 0.4): 0.525 and 0.475 of it
    assert _shares(ml) == pytest.approx({"ml-nlp": 0.525 * 0.4, "ml-vision": 0.475 * 0.4})


def _shares(rec: dict[str, Any]) -> dict[str, float]:
    settings = rec["evidence"]["replay"]["settings"]
    return {k.split(".")[1]: float(v) for k, v in (s.split("=") for s in settings)}
