"""Fair-share weights and GPU billing weights on hand-made jobs, figures by hand."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from detectors.recommend import RecommendConfig, fairshare
from detectors.recommend.config import BillingConfig, FairshareConfig
from detectors.recommend.run import recommend
from tests.detectors.recommend.lake import NOW, reading, recs_of
from tests.marts import rows as r
from warehouse.connection import connect

H = 3600.0


def fairshare_jobs():
    """physics: 2 GPUs × 4 h, no wait (8 GPU-h). chem: 1 GPU × 0.5 h after waiting 0.5 h
    (demand 1 GPU-h). bio: 1 GPU × 1 h, no wait (1 GPU-h)."""
    return [
        r.job("p0", 0, 4 * H, gpus=2),
        r.job("c0", 0.5 * H, H, user="bob", account="chem", submit_ts=r.at(0)),
        r.job("b0", 0, H, user="dave", account="bio"),
    ]


@pytest.fixture(scope="module")
def fairshare_lake(tmp_path_factory):
    """The lake of `fairshare_jobs()`, built once for the tests that only read it."""
    root = tmp_path_factory.mktemp("fairshare")
    r.build_lake(root, jobs=fairshare_jobs())
    return root


def test_fairshare_moves_shares_halfway_to_demand(fairshare_lake):
    con = reading(fairshare_lake)
    [rec] = recs_of(
        recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",)), "fairshare_weight"
    )
    accounts = {a["account"]: a for a in rec["evidence"]["accounts"]}

    # demand 8 + 1 + 1 = 10 GPU-h: shares of demand 0.8, 0.1, 0.1 against 1/3 each
    assert accounts["physics"]["demand_share"] == pytest.approx(0.8)
    assert accounts["chem"]["demand_gpu_h"] == pytest.approx(1.0)
    assert accounts["chem"]["waited_gpu_h"] == pytest.approx(0.5)
    assert accounts["physics"]["usage_over_share"] == pytest.approx((8 / 9.5) * 3, abs=1e-6)
    # all three flagged (0.8 >= 2/3, 0.1 <= 1/6); new shares (1/3 + d) / 2 of 300 raw shares
    assert rec["evidence"]["flagged"] == ["bio", "chem", "physics"]
    assert (
        "sacctmgr -i modify account name=physics cluster=della set fairshare=170" in rec["config"]
    )
    assert "sacctmgr -i modify account name=chem cluster=della set fairshare=65" in rec["config"]
    assert rec["expected_gain_gpu_h"] is None
    assert rec["risk"].startswith("priority falls for bio (share 0.333 -> 0.217)")


def test_fairshare_with_configured_shares_that_match_demand_changes_nothing(fairshare_lake):
    con = reading(fairshare_lake)
    config = RecommendConfig(
        fairshare=FairshareConfig(shares={"physics": 80, "chem": 10, "bio": 10})
    )

    assert recommend(con, config, NOW, kinds=("fairshare_weight",)).num_rows == 0


def _assoc(account, shares, updated_ts, user=None, parent="root"):
    return {
        "cluster": "della",
        "account": account,
        "user": user,
        "parent": None if user else parent,
        "raw_shares": shares,
        "source": "sacctmgr",
        "updated_ts": updated_ts,
    }


def test_fairshare_starts_from_the_clusters_current_shares(fairshare_lake, tmp_path):
    """The raw shares `collect slurm-shares` landed (latest snapshot) are what sacctmgr changes:
    physics 10, chem 60, bio 30 of 100 (an older snapshot and user rows are ignored)."""
    shutil.copytree(fairshare_lake, tmp_path, dirs_exist_ok=True)  # the lake of fairshare_jobs()
    old, new = r.at(-86400), r.at(0)
    r.land(
        tmp_path,
        "associations",
        [_assoc("physics", 99, old), _assoc("chem", 1, old)]
        + [_assoc("physics", 10, new), _assoc("chem", 60, new), _assoc("bio", 30, new)]
        + [_assoc("physics", 1, new, user="alice")],
        batch_id="shares",
    )
    con = connect(tmp_path)
    [rec] = recs_of(
        recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",)), "fairshare_weight"
    )
    accounts = {a["account"]: a for a in rec["evidence"]["accounts"]}

    assert rec["evidence"]["raw_shares_from"] == "associations"
    assert accounts["chem"]["share"] == pytest.approx(0.6)
    # (share + demand share) / 2 of the 100 raw shares the cluster has now:
    # physics (0.1 + 0.8) / 2 = 0.45, chem (0.6 + 0.1) / 2 = 0.35, bio (0.3 + 0.1) / 2 = 0.2
    lines = rec["config"].splitlines()
    assert lines == [
        "sacctmgr -i modify account name=bio cluster=della set fairshare=20",
        "sacctmgr -i modify account name=chem cluster=della set fairshare=35",
        "sacctmgr -i modify account name=physics cluster=della set fairshare=45",
    ]
    # the accounts whose priority falls are those whose shares the commands lower
    assert rec["risk"] == (
        "priority falls for bio (share 0.300 -> 0.200), chem (share 0.600 -> 0.350)"
    )


def nested_tree_lake(tmp_path):
    """The tree as sacctmgr lands it: root -> ml (40), research (60); ml -> ml-nlp (10),
    ml-vision (30). Jobs, no waits: ml-nlp 4 GPUs x 2 h = 8 GPU-h, ml-vision 1 x 2 h = 2,
    dave straight in ml 2 x 3 h = 6, research 1 x 2 h = 2."""
    jobs = [
        r.job("n0", 0, 2 * H, gpus=4, account="ml-nlp"),
        r.job("v0", 0, 2 * H, user="bob", account="ml-vision"),
        r.job("m0", 0, 3 * H, gpus=2, user="dave", account="ml"),
        r.job("r0", 0, 2 * H, user="carol", account="research"),
    ]
    r.build_lake(tmp_path, jobs=jobs)
    t = r.at(0)
    r.land(
        tmp_path,
        "associations",
        [
            _assoc("root", 1, t, parent=None),
            _assoc("root", 1, t, user="root"),
            _assoc("ml", 40, t),
            _assoc("research", 60, t),
            _assoc("ml-nlp", 10, t, parent="ml"),
            _assoc("ml-vision", 30, t, parent="ml"),
            _assoc("ml", 1, t, user="dave"),
            _assoc("ml-nlp", 1, t, user="alice"),
        ],
        batch_id="shares",
    )
    return connect(tmp_path)


def test_fairshare_in_a_nested_tree_compares_siblings_under_each_parent(tmp_path):
    con = nested_tree_lake(tmp_path)
    top, ml = recs_of(
        recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",)), "fairshare_weight"
    )

    # under root: ml's demand is its own job and its sub-accounts' (8 + 2 + 6 = 16 GPU-h)
    # against research's 2: demand shares 16/18 and 2/18 against shares 0.4 and 0.6; both
    # flagged; new shares (0.4 + 0.8889) / 2 = 0.6444 and (0.6 + 0.1111) / 2 = 0.3556 of 100
    assert (top["scope"], top["evidence"]["parent"]) == ("cluster", "root")
    figures = {a["account"]: a for a in top["evidence"]["accounts"]}
    assert set(figures) == {"ml", "research"}
    assert figures["ml"]["demand_gpu_h"] == pytest.approx(16.0)
    assert figures["ml"]["demand_share"] == pytest.approx(16 / 18)
    assert top["config"].splitlines() == [
        "sacctmgr -i modify account name=ml cluster=della set fairshare=64",
        "sacctmgr -i modify account name=research cluster=della set fairshare=36",
    ]
    assert top["risk"] == "priority falls for research (share 0.600 -> 0.356)"

    # under ml: its sub-accounts only (dave's job in ml itself is not theirs): ml-nlp 8 and
    # ml-vision 2 GPU-h, demand shares 0.8 and 0.2 against 10/40 = 0.25 and 30/40 = 0.75;
    # new shares (0.25 + 0.8) / 2 = 0.525 and (0.75 + 0.2) / 2 = 0.475 of ml's 40 raw shares
    assert (ml["scope"], ml["evidence"]["parent"]) == ("parent=ml", "ml")
    figures = {a["account"]: a for a in ml["evidence"]["accounts"]}
    assert set(figures) == {"ml-nlp", "ml-vision"}
    assert figures["ml-nlp"]["share"] == pytest.approx(0.25)
    assert figures["ml-nlp"]["demand_share"] == pytest.approx(0.8)
    assert ml["evidence"]["raw_shares_total"] == 40
    assert ml["config"].splitlines() == [
        "sacctmgr -i modify account name=ml-nlp cluster=della set fairshare=21",
        "sacctmgr -i modify account name=ml-vision cluster=della set fairshare=19",
    ]
    assert ml["risk"] == (
        "priority falls among the sub-accounts of ml for ml-vision (share 0.750 -> 0.475)"
    )
    assert top["rec_id"] != ml["rec_id"]


def test_fairshare_does_not_compare_accounts_of_different_parents(tmp_path):
    """ml and research use the same (ml-nlp 4 GPUs x 2 h + ml-vision 1 x 2 h = 10 GPU-h;
    research 1 x 10 h = 10): nothing to change under root. Were the three accounts siblings
    (shares 10, 30, 60 of 100), ml-nlp would get (0.1 + 0.4) / 2 of 100 = fairshare=25 of a
    total it does not share with research; among ml's sub-accounts it gets 21 of ml's 40."""
    jobs = [
        r.job("n0", 0, 2 * H, gpus=4, account="ml-nlp"),
        r.job("v0", 0, 2 * H, user="bob", account="ml-vision"),
        r.job("r0", 0, 10 * H, user="carol", account="research"),
    ]
    r.build_lake(tmp_path, jobs=jobs)
    t = r.at(0)
    r.land(
        tmp_path,
        "associations",
        [
            _assoc("ml", 40, t),
            _assoc("research", 60, t),
            _assoc("ml-nlp", 10, t, parent="ml"),
            _assoc("ml-vision", 30, t, parent="ml"),
        ],
        batch_id="shares",
    )
    # under root: 10 and 10 GPU-h, demand shares 0.5 / 0.5 against 0.4 / 0.6: nothing flagged
    [rec] = recs_of(
        recommend(connect(tmp_path), RecommendConfig(), NOW, kinds=("fairshare_weight",)),
        "fairshare_weight",
    )
    assert rec["scope"] == "parent=ml"
    assert rec["config"].splitlines() == [
        "sacctmgr -i modify account name=ml-nlp cluster=della set fairshare=21",
        "sacctmgr -i modify account name=ml-vision cluster=della set fairshare=19",
    ]


def billing_jobs():
    """1 h each: physics 8 GPUs / 16 CPUs, chem 1 GPU / 64 CPUs, bio 1 GPU / 8 CPUs."""
    return [
        r.job("p0", 0, H, gpus=8, cpus=16),
        r.job("c0", 0, H, user="bob", account="chem", cpus=64),
        r.job("b0", 0, H, user="dave", account="bio", cpus=8),
    ]


def test_gpu_billing_weight_by_hand(tmp_path):
    con = r.build_lake(tmp_path, jobs=billing_jobs())
    [rec] = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("gpu_billing",)), "gpu_billing")
    ev = rec["evidence"]
    accounts = {a["account"]: a for a in ev["accounts"]}

    # CPUs per GPU: 2, 64, 8 -> median 8
    assert ev["gpu_weight_cpus"] == 8
    # CPU-only billing: 16, 64, 8 of 88; GPU-hours 8, 1, 1 of 10
    assert accounts["physics"]["cpu_only_share"] == pytest.approx(16 / 88, abs=1e-6)
    assert accounts["physics"]["gpu_share"] == pytest.approx(0.8)
    # chem: 64/88 of CPU billing but 1/10 of GPU-hours, the largest gap
    assert ev["largest_share_gap"] == pytest.approx(64 / 88 - 0.1, abs=1e-6)
    # billed with GRES/gpu=8: 16 + 64 = 80, 64 + 8 = 72, 8 + 8 = 16 of 168
    assert accounts["physics"]["proposed_share"] == pytest.approx(80 / 168, abs=1e-6)
    assert accounts["chem"]["proposed_share"] == pytest.approx(72 / 168, abs=1e-6)
    # applied live, and slurm.conf edited in place (never a second PartitionName=gpu line)
    assert (
        'scontrol -M della update PartitionName=gpu TRESBillingWeights="CPU=1.0,GRES/gpu=8"\n'
        in rec["config"]
    )
    assert not [line for line in rec["config"].splitlines() if line.startswith("PartitionName=")]
    # bio rises too: 8/88 = 0.091 -> 16/168 = 0.095
    assert rec["risk"] == "billed usage (and so fair-share priority cost) rises for bio, physics"


def test_gpu_billing_not_proposed_when_cpu_billing_already_tracks_gpus(tmp_path):
    jobs = [r.job("p0", 0, H, gpus=8, cpus=64), r.job("c0", 0, H, account="chem", cpus=8)]
    con = r.build_lake(tmp_path, jobs=jobs)

    assert recommend(con, RecommendConfig(), NOW, kinds=("gpu_billing",)).num_rows == 0
    assert (
        recommend(
            con,
            RecommendConfig(billing=BillingConfig(min_share_gap=0.0)),
            NOW,
            kinds=("gpu_billing",),
        ).num_rows
        == 1
    )


def test_kueue_clusters_get_weights_and_resource_weights(tmp_path):
    jobs = [j | {"source": "kubernetes"} for j in fairshare_jobs()]
    con = r.build_lake(tmp_path, jobs=jobs)
    table = recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",))
    [rec] = recs_of(table, "fairshare_weight")

    # physics' new share 0.5667 of 3 accounts = weight 1.7 (1 = an equal share)
    assert rec["target"] == "kueue"
    assert (
        "kubectl -n physics patch localqueue <queue> --type=merge "
        '-p \'{"spec":{"fairSharing":{"weight":"1.7"}}}\'' in rec["config"]
    )

    billing = [j | {"source": "kubernetes"} for j in billing_jobs()]
    con = r.build_lake(tmp_path / "b", jobs=billing)
    [rec] = recs_of(recommend(con, RecommendConfig(), NOW, kinds=("gpu_billing",)), "gpu_billing")
    assert "nvidia.com/gpu: 8" in rec["config"] and "admissionFairSharing" in rec["config"]


ACCOUNT_NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@st.composite
def trees(draw):
    """A share tree as sacctmgr lands it: each account's parent is root or an account named
    before it (no loops); some accounts are not in it."""
    names = draw(st.lists(ACCOUNT_NAMES, unique=True))
    return {n: draw(st.sampled_from(["root", *names[:i]])) for i, n in enumerate(names)}


@given(parents=trees(), charged=st.lists(ACCOUNT_NAMES | st.just("root"), max_size=6))
def test_each_job_rolls_up_to_one_child_of_every_parent_on_its_path(parents, charged):
    levels = fairshare._levels(charged, parents)
    for parent, child_of in levels.items():
        for account, child in child_of.items():
            assert parents.get(child, "root") == parent  # siblings share their parent
            assert child in fairshare._path(account, parents)
    for account in set(charged):
        path = fairshare._path(account, parents)
        assert "root" not in path  # jobs charged to root itself are no account's to reweight
        assert sum(account in child_of for child_of in levels.values()) == len(path)
    assert not levels or next(iter(levels)) == "root" or "root" not in levels


@given(
    parents=st.dictionaries(ACCOUNT_NAMES, ACCOUNT_NAMES | st.just("root")),
    charged=st.lists(ACCOUNT_NAMES, max_size=6),
)
def test_a_loop_in_the_tree_ends_the_walk(parents, charged):
    """Slurm allows no loops, but a damaged snapshot must not hang or count a job twice."""
    levels = fairshare._levels(charged, parents)
    for account in set(charged):
        path = fairshare._path(account, parents)
        assert len(path) == len(set(path)) <= len(parents) + 1
        assert sum(account in child_of for child_of in levels.values()) == len(path)


def test_an_under_served_account_is_not_cut_and_no_share_is_raised_over_it(tmp_path):
    """physics: 2 GPUs × 40 h (80 GPU-h). chem: 1 GPU × 1 h after waiting 5 h: 1/82 of the
    usage for a 1/3 share while its jobs queued, which the weekly report calls under-served.
    Its demand share 6/87 is small only next to physics'. bio: 1 GPU × 1 h, no wait. (M5)"""
    jobs = [
        r.job("p0", 0, 40 * H, gpus=2),
        r.job("c0", 5 * H, 6 * H, user="bob", account="chem", submit_ts=r.at(0)),
        r.job("b0", 0, H, user="dave", account="bio"),
    ]
    con = r.build_lake(tmp_path, jobs=jobs)
    [rec] = recs_of(
        recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",)), "fairshare_weight"
    )

    # bio asked for little and waited for nothing: its cut stands; chem is kept, physics too
    assert rec["evidence"]["flagged"] == ["bio"]
    assert rec["evidence"]["under_served"] == ["chem"]
    assert "name=chem" not in rec["config"] and "name=physics" not in rec["config"]
    assert (
        "chem got 0.0× its share while its jobs waited 5.0 GPU-h (under-served: not cut)"
        in (rec["risk"])
    )


def test_an_account_whose_jobs_never_started_is_demand_and_under_served(tmp_path):
    """The probe: an account whose every job was left queued was no account to the
    recommender (it read the jobs that started), and its siblings' shares were raised over it.
    physics: 2 GPUs × 40 h; bio: 1 GPU × 1 h, no wait; chem: 1 GPU asked, queued from 0 to the
    data's end (40 h) and never started: under-served, so no share is raised."""
    jobs = [
        r.job("p0", 0, 40 * H, gpus=2),
        r.job("b0", 0, H, user="dave", account="bio"),
        r.job("c0", 0, None, user="bob", account="chem", state="PENDING", gpus=0)
        | {"start_ts": None, "gpus_requested": 1, "updated_ts": r.at(40 * H)},
    ]
    con = r.build_lake(tmp_path, jobs=jobs)
    [rec] = recs_of(
        recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",)), "fairshare_weight"
    )

    chem = next(a for a in rec["evidence"]["accounts"] if a["account"] == "chem")
    assert chem["waited_gpu_h"] == pytest.approx(40.0) and chem["alloc_gpu_h"] == 0
    assert rec["evidence"]["under_served"] == ["chem"]
    assert "name=physics" not in rec["config"]  # not raised over chem
    assert "name=chem" not in rec["config"]  # and chem is not cut


def test_where_no_sibling_ran_every_one_that_waited_is_under_served(tmp_path):
    # physics (8 GPUs asked) and chem (1) both queued 40 h and never ran: usage 0 ÷ 0 was NaN,
    # nobody read as under-served, and chem's share was cut (review)
    jobs = [
        r.job("p0", 0, None, gpus=0, state="PENDING")
        | {"start_ts": None, "gpus_requested": 8, "updated_ts": r.at(40 * H)},
        r.job("c0", 0, None, user="bob", account="chem", state="PENDING", gpus=0)
        | {"start_ts": None, "gpus_requested": 1, "updated_ts": r.at(40 * H)},
        r.job("b0", 0, H, user="dave", account="other", partition="cpu", gpus=0),
    ]
    con = r.build_lake(tmp_path, jobs=jobs)
    found = recs_of(
        recommend(con, RecommendConfig(), NOW, kinds=("fairshare_weight",)), "fairshare_weight"
    )

    assert all("name=chem" not in rec["config"] for rec in found)
    for rec in found:
        assert all(a["usage_share"] == 0 for a in rec["evidence"]["accounts"])
