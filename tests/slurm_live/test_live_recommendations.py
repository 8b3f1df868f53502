"""The Slurm recommendations' `config`, applied as an operator would, on the real Slurm 22.05.

Each test takes the text a recommender generates for this cluster (its own names: cluster
`testcluster`, partition `gpu`, nodes gpu-node01/02), runs every line that is not a comment as
a command, and checks with sacctmgr / scontrol that the cluster now does what the
recommendation says. The slurm.conf edits the text asks for are made on the existing lines and
must survive `scontrol reconfigure` (appending a second `PartitionName=gpu` line, as the text
once said, stops slurmctld: "duplicate entry for partition gpu").

Everything is put back afterwards (an account of its own for the GPU caps, the original
slurm.conf and a reconfigure for the partition, RESUME for the node), since the other live
tests of the session share the cluster.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
import time
from collections.abc import Iterator

import pytest

from collector.sources.slurm.assoc import collect_associations
from detectors.recommend import RecommendConfig, billing, drain_node, fairshare, gpu_cap, time_limit
from detectors.recommend.recommendation import ClusterFacts
from detectors.recommend.run import recommend as recommend_all
from tests.marts import rows as r
from tests.slurm_live.cluster import CLUSTER, SlurmCluster
from warehouse.connection import connect
from warehouse.lake import Lake

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.timeout(600)]

T0 = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
FACTS = ClusterFacts(CLUSTER, "slurm", 12, T0, T0, T0.timestamp(), T0.timestamp())
ACCOUNT = "recs"  # an account of this module's own: its GPU caps touch no other test's jobs
COMMANDS = frozenset({"sacctmgr", "scontrol"})


def apply(cluster: SlurmCluster, config: str) -> list[list[str]]:
    """Run every non-comment line of `config` (each must be a sacctmgr/scontrol command)."""
    ran = []
    for line in config.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        argv = shlex.split(line)
        assert argv[0] in COMMANDS, f"not a command an operator can paste: {line!r}"
        cluster.run(*argv)
        ran.append(argv)
    assert ran, "the recommendation has no command to run"
    return ran


def assoc(cluster: SlurmCluster, *where: str, fields: str = "fairshare,grptres") -> list[str]:
    out = cluster.run("sacctmgr", "-n", "-P", "show", "assoc", *where, f"format={fields}")
    return out.splitlines()


def partition(cluster: SlurmCluster, name: str = "gpu") -> dict[str, str]:
    out = cluster.run("scontrol", "show", "partition", name)
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


@pytest.fixture(scope="module")
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    c = slurm_cluster
    c.start()  # every daemon up: an earlier live test may have left one stopped (idempotent)
    c.jobs_dir.mkdir(mode=0o1777, exist_ok=True)
    c.run("sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={CLUSTER}", "fairshare=10")
    c.run("sacctmgr", "-i", "add", "user", "alice", f"account={ACCOUNT}", f"cluster={CLUSTER}")
    conf = c.conf.read_text(encoding="utf-8")
    try:
        yield c
    finally:
        c.conf.write_text(conf, encoding="utf-8")
        c.run("scontrol", "reconfigure")
        # RESUME is refused for a node that is not drained (a run of some tests only)
        if re.search(r"State=\S*DRAIN", c.run("scontrol", "show", "node", "gpu-node02")):
            c.run("scontrol", "update", "NodeName=gpu-node02", "State=RESUME")
        for account, shares in (("research", 60), ("ml", 40)):
            c.run("sacctmgr", "-i", "modify", "account", "where", f"name={account}",
                  f"cluster={CLUSTER}", "set", f"fairshare={shares}")  # fmt: skip
        c.run("sacctmgr", "-i", "modify", "qos", "normal", "set", "MaxTRESPerUser=gres/gpu=-1")
        c.run("scancel", f"--account={ACCOUNT}")
        c.wait_for("the recs jobs to leave", lambda: not c.run("squeue", "-h", "-A", ACCOUNT))
        c.run("sacctmgr", "-i", "delete", "user", "alice", f"account={ACCOUNT}")
        c.run("sacctmgr", "-i", "delete", "account", ACCOUNT)


def pending_reason(cluster: SlurmCluster, job: str) -> str:
    return cluster.run("squeue", "-h", "-j", job, "-o", "%T %r").strip()


def test_gpu_caps_are_set_and_enforced(cluster):
    user = gpu_cap._user_config(FACTS, "alice", ACCOUNT, 1)
    account = gpu_cap._account_config(FACTS, ACCOUNT, 2)
    apply(cluster, user)
    apply(cluster, account)

    where = (f"cluster={CLUSTER}", f"account={ACCOUNT}")
    assert assoc(cluster, *where, "user=alice") == ["1|gres/gpu=1"]
    assert assoc(cluster, *where, "user=") == ["10|gres/gpu=2"]  # the account's own line
    # the cap holds: alice's second 1-GPU job waits for her first, on the association limit
    first = cluster.submit("alice", f"--account={ACCOUNT}", "--gres=gpu:h100:1")
    cluster.wait_state(first, "RUNNING")
    second = cluster.submit("alice", f"--account={ACCOUNT}", "--gres=gpu:h100:1")
    cluster.wait_for(
        "the over-cap job to pend on its limit",
        lambda: pending_reason(cluster, second) == "PENDING AssocGrpGRES",
        timeout=30,
    )
    cluster.release(first)
    cluster.wait_state(second, "RUNNING")
    cluster.release(second)

    # the alternative the text offers in a comment: a per-user cap on the QOS
    qos = next(line for line in user.splitlines() if "modify qos" in line)
    apply(cluster, qos.split(": ", 1)[1])
    out = cluster.run("sacctmgr", "-n", "-P", "show", "qos", "normal", "format=maxtrespu")
    assert out.strip() == "gres/gpu=1"


def test_fairshare_commands_set_the_account_shares_only(cluster):
    changes = [{"account": "ml", "new_share": 0.3}, {"account": "research", "new_share": 0.7}]
    apply(cluster, fairshare._config(FACTS, changes, 100.0, 2))

    shares = assoc(cluster, f"cluster={CLUSTER}", fields="account,user,fairshare")
    assert "ml||30" in shares and "research||70" in shares
    # user associations under them keep their own shares
    assert "ml|bob|1" in shares and "research|alice|1" in shares


def test_fairshare_in_a_nested_account_tree_sets_shares_among_siblings(cluster, tmp_path):
    """Sub-accounts recs-a (10) and recs-b (30) under recs: the tree as `collect slurm-shares`
    lands it from this cluster, jobs recs-a 4 GPUs x 2 h = 8 GPU-h and recs-b 1 x 2 h = 2:
    demand shares 0.8 / 0.2 against 0.25 / 0.75 among recs' sub-accounts, new shares
    (0.25 + 0.8) / 2 = 0.525 and (0.75 + 0.2) / 2 = 0.475 of their 40 raw shares: 21 and 19."""
    subs = {"recs-a": 10, "recs-b": 30}
    for account, shares in subs.items():
        cluster.run("sacctmgr", "-i", "add", "account", account, f"parent={ACCOUNT}",
                    f"cluster={CLUSTER}", f"fairshare={shares}")  # fmt: skip
    try:
        jobs = [
            r.job("a0", 0, 7200, gpus=4, account="recs-a", cluster=CLUSTER),
            r.job("b0", 0, 7200, user="bob", account="recs-b", cluster=CLUSTER),
        ]
        r.build_lake(tmp_path, jobs=jobs)
        landed, bad = collect_associations(
            Lake.at(tmp_path), CLUSTER, lambda argv: cluster.run(*argv), dt.datetime.now(dt.UTC)
        )
        assert landed and not bad
        table = recommend_all(
            connect(tmp_path),
            RecommendConfig(),
            r.T0 + dt.timedelta(days=1),
            kinds=(fairshare.KIND,),
        )
        [rec] = table.to_pylist()  # only recs' sub-accounts had jobs: nothing under root
        assert rec["scope"] == f"parent={ACCOUNT}"
        apply(cluster, rec["config"])

        tree = assoc(cluster, f"cluster={CLUSTER}", "user=", fields="account,parentname,fairshare")
        assert f"recs-a|{ACCOUNT}|21" in tree and f"recs-b|{ACCOUNT}|19" in tree
        assert f"{ACCOUNT}|root|10" in tree  # the parent's own shares are not touched
    finally:
        for account in subs:
            cluster.run("sacctmgr", "-i", "delete", "account", account)


def _edit_partition_line(cluster: SlurmCluster, settings: list[str]) -> None:
    """Set `key=value` settings on the existing PartitionName=gpu line of slurm.conf."""
    lines = cluster.conf.read_text(encoding="utf-8").splitlines()
    [i] = [n for n, line in enumerate(lines) if line.startswith("PartitionName=gpu ")]
    words = shlex.split(lines[i])
    for setting in settings:
        key = setting.split("=", 1)[0]
        words = [w for w in words if w.split("=", 1)[0].lower() != key.lower()]
        words.append(setting)
    lines[i] = " ".join(shlex.quote(w) if "," in w else w for w in words)
    cluster.conf.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _reconfigure(cluster: SlurmCluster) -> None:
    cluster.run("scontrol", "reconfigure")
    time.sleep(1)
    cluster.run("scontrol", "ping")  # slurmctld survived the new slurm.conf


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            time_limit._partition_config(FACTS, "gpu", 5 * 3600, 2 * 86400 + 3600),
            {"DefaultTime": "05:00:00", "MaxTime": "2-01:00:00"},
        ),
        (
            billing._config(FACTS, ["gpu"], 6.0),
            {"TRESBillingWeights": "CPU=1.0,GRES/gpu=6"},
        ),
    ],
    ids=["time_limit", "gpu_billing"],
)
def test_partition_settings_apply_live_and_in_slurm_conf(cluster, config, expected):
    [argv] = apply(cluster, config)
    got = partition(cluster)
    assert {k: got[k] for k in expected} == expected

    # the slurm.conf edit the text asks for: the same settings on the existing line
    assert not [line for line in config.splitlines() if line.startswith("PartitionName=")]
    original = cluster.conf.read_text(encoding="utf-8")
    _reconfigure(cluster)  # back to slurm.conf's values, none of them the proposed ones
    got = partition(cluster)
    assert all(got[k] != v for k, v in expected.items())
    assert argv[:4] == ["scontrol", "-M", CLUSTER, "update"]  # aimed at this cluster
    _edit_partition_line(cluster, argv[5:])  # (after PartitionName=)
    try:
        _reconfigure(cluster)
        got = partition(cluster)
        assert {k: got[k] for k in expected} == expected  # read back from slurm.conf
    finally:
        cluster.conf.write_text(original, encoding="utf-8")
        _reconfigure(cluster)


def test_drain_sets_the_state_and_the_whole_reason(cluster):
    reason = '1 hardware event(s): xid 79; 3 of 4 jobs failed (cluster rate 38%) it\'s "odd"'
    apply(cluster, drain_node._config(FACTS, "gpu-node02", reason))

    out = cluster.run("scontrol", "show", "node", "gpu-node02")
    assert re.search(r"State=\S*DRAIN", out)
    # Slurm keeps the reason whole (double quotes, which scontrol would strip, become ')
    assert f"Reason=gpuledger: {reason.replace(chr(34), chr(39))} [" in out
