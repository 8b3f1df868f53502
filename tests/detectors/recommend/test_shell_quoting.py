"""Every command a recommendation or an alert's fix prints for copying is shell-safe.

Accounts, users, partitions, nodes and clusters come from the scheduler's data; whatever they
are named, the printed command, parsed as a shell parses it (`shlex.split`), gives exactly the
argument list intended, and a name in a `#` comment cannot start a command line.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex

import pytest

from app.alerts.findings import FindingContext
from app.alerts.fixes import concrete_fix
from detectors.recommend import billing, drain_node, fairshare, gpu_cap, power_cap, time_limit
from detectors.recommend.recommendation import ClusterFacts
from detectors.replay.policy import slurm_lines

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
HOSTILE = [
    "a; rm -rf ~",
    "$(id)",
    "`id`",
    "with space",
    'it\'s "quoted"',
    "x' ; touch /tmp/pwned; echo '",
    "a&&b|c>d",
    "plain",
]


def facts(target: str, cluster: str = "della") -> ClusterFacts:
    return ClusterFacts(cluster, target, 8, T0, T0, T0.timestamp(), T0.timestamp() + 3600)


def commands(text: str) -> list[list[str]]:
    """The argv of every line that is no comment or YAML (what a shell would run)."""
    return [shlex.split(line) for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize("name", HOSTILE)
def test_fair_share_commands(name):
    changes = [{"account": name, "new_share": 0.5}]
    [kubectl] = [c for c in commands(fairshare._config(facts("kueue"), changes, 100.0, 2))]
    assert kubectl == [
        "kubectl", "-n", name, "patch", "localqueue", "<queue>", "--type=merge",
        "-p", '{"spec":{"fairSharing":{"weight":"1.0"}}}',
    ]  # fmt: skip
    [sacctmgr] = commands(fairshare._config(facts("slurm", cluster=name), changes, 100.0, 2))
    assert sacctmgr == [
        "sacctmgr", "-i", "modify", "account", f"name={name}", f"cluster={name}",
        "set", "fairshare=50",
    ]  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE)
def test_gpu_cap_commands(name):
    user = commands(gpu_cap._user_config(facts("slurm", cluster=name), name, name, 4))
    assert user == [
        ["sacctmgr", "-i", "modify", "user", "where", f"name={name}", f"account={name}",
         f"cluster={name}", "set", "GrpTRES=gres/gpu=4"],
    ]  # fmt: skip
    account = commands(gpu_cap._account_config(facts("slurm", cluster=name), name, 4))
    assert account == [
        ["sacctmgr", "-i", "modify", "account", "where", f"name={name}", f"cluster={name}",
         "set", "GrpTRES=gres/gpu=4"],
    ]  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE)
def test_billing_time_limit_and_drain_commands(name):
    # scontrol names the cluster (-M) as sacctmgr does: partition and node names repeat across
    # the clusters of one lake, and the cluster's name is data too
    on = facts("slurm", cluster=name)
    assert commands(billing._config(on, [name], 2.0)) == [
        ["scontrol", "-M", name, "update", f"PartitionName={name}",
         "TRESBillingWeights=CPU=1.0,GRES/gpu=2"]
    ]  # fmt: skip
    assert commands(time_limit._partition_config(on, name, 3600, 7200)) == [
        ["scontrol", "-M", name, "update", f"PartitionName={name}", "DefaultTime=01:00:00",
         "MaxTime=02:00:00"]
    ]  # fmt: skip
    assert commands(drain_node._config(on, name, "xid 79")) == [
        ["scontrol", "-M", name, "update", f"NodeName={name}", "State=DRAIN",
         "Reason=gpuledger: xid 79"]
    ]  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE)
def test_the_policy_labs_commands(name):
    # the Policy lab's "To apply it" lines interpolated names bare: a cluster `be ta;$(id)`
    # ran `id` when pasted
    lines = slurm_lines(
        [
            f"partition.{name}.MaxTime=1:00:00",
            f"assoc.{name}.GrpTRES=gres/gpu=4",
            f"assoc.{name}.{name}.GrpTRES=gres/gpu=2",
            f"qos.{name}.Priority=10",
            f"node.{name}.State=drain",
            f"assoc.{name}.Shares=0.25",
            f"bf_window={name}",
        ],
        name,
    )
    assert commands("\n".join(lines)) == [
        ["scontrol", "-M", name, "update", f"PartitionName={name}", "MaxTime=1:00:00"],
        ["sacctmgr", "-i", "modify", "account", "where", f"name={name}", f"cluster={name}",
         "set", "GrpTRES=gres/gpu=4"],
        ["sacctmgr", "-i", "modify", "user", "where", f"name={name}", f"account={name}",
         f"cluster={name}", "set", "GrpTRES=gres/gpu=2"],
        ["sacctmgr", "-i", "modify", "qos", "where", f"name={name}", "set", "Priority=10"],
        ["scontrol", "-M", name, "update", f"NodeName={name}", "State=DRAIN",
         "Reason=policy-lab"],
    ]  # fmt: skip
    assert all(line.startswith(("#", "scontrol ", "sacctmgr ")) for line in lines)


@pytest.mark.parametrize("name", HOSTILE)
def test_power_cap_commands(name):
    nodes = [name, "g002"]
    assert commands(power_cap._config(facts("kueue"), name, nodes, 300)) == [
        ["nvidia-smi", "-pl", "300"],
        ["kubectl", "label", "node", name, "g002", "gpuledger.io/power-cap-w=300", "--overwrite"],
    ]
    assert commands(power_cap._config(facts("slurm"), name, nodes, 300)) == [
        ["pdsh", "-w", f"{name},g002", "nvidia-smi", "-pl", "300"],
    ]


def test_a_newline_in_a_name_cannot_start_a_command_in_a_comment():
    name = "gpu\nrm -rf ~"
    for text in (
        time_limit._partition_config(facts("slurm"), name, 3600, 7200),
        time_limit._user_config(facts("slurm"), name, 3600),
        time_limit._user_config(facts("kueue"), name, 3600),
        power_cap._config(facts("slurm"), name, ["g001"], 300),
        power_cap._config(facts("kueue"), name, ["g001"], 300),
    ):
        # read as a shell reads the script: a quoted name may span lines, a comment ends at
        # its line; `rm` is never a word of its own
        assert "rm" not in shlex.split(text, comments=True), text


def finding(**over) -> FindingContext:
    base = {
        "cluster": "della",
        "finding_id": "f",
        "detector": "idle_job",
        "severity": "warn",
        "subject_kind": "job",
        "subject_id": "j",
        "detected_ts": T0,
        "job_id": "4242",
        "job_state": "RUNNING",
    }
    return FindingContext(**{**base, **over})


def backticked(text: str) -> list[list[str]]:
    return [shlex.split(cmd) for cmd in re.findall(r"`([^`]*)`", text)]


# (a backtick would end the Markdown code span the fix is shown in, not the shell word)
@pytest.mark.parametrize("name", [n for n in HOSTILE if "`" not in n])
def test_alert_fixes_quote_what_they_interpolate(name):
    hung = concrete_fix(finding(detector="hung_job", job_id=name), ("idle_job",))
    assert ["scancel", name] in backticked(hung)
    idle = concrete_fix(finding(job_id=name), ("idle_job",))
    assert ["scancel", name] in backticked(idle)
    drain = concrete_fix(
        finding(detector="xid_errors", subject_kind="node", node=name), ("idle_job",)
    )
    assert [
        "scontrol", "update", f"NodeName={name}", "State=DRAIN", "Reason=gpuledger xid_errors",
    ] in backticked(drain)  # fmt: skip
    mig = concrete_fix(finding(detector="low_util", evidence={"mig_profile": name}), ())
    assert [f"--gres=gpu:{name}:1"] in backticked(mig)
