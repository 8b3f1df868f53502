"""The simulated cluster's hardware and people: nodes of GPUs, accounts with fair-share
entitlements, and users, a few of whom are chronically wasteful."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np

__all__ = ["Account", "Fleet", "GpuModel", "User", "make_fleet", "make_population"]


@dataclass(frozen=True, slots=True)
class GpuModel:
    """What the telemetry of one GPU model looks like (board limits, idle draw, clocks)."""

    name: str
    fb_total_mib: float
    power_limit_w: float
    idle_power_w: float
    sm_clock_max_mhz: float
    sm_clock_idle_mhz: float
    mem_clock_mhz: float
    hbm: bool


MODELS = {
    "h100": GpuModel("NVIDIA H100 80GB HBM3", 81559, 700, 70, 1980, 345, 2619, True),
    "a100": GpuModel("NVIDIA A100-SXM4-80GB", 81920, 400, 55, 1410, 210, 1593, True),
    "l4": GpuModel("NVIDIA L4", 23034, 72, 16, 2040, 210, 6251, False),
}


@dataclass(frozen=True, slots=True)
class Fleet:
    """Nodes × GPUs. Arrays are indexed by the fleet-wide GPU number `g`."""

    cluster: str
    nodes: tuple[str, ...]
    gpus_per_node: int
    node_of: np.ndarray  # int32 [g] -> node number
    index_of: np.ndarray  # int16 [g] -> device ordinal on its node
    uuids: tuple[str, ...]
    model_of: tuple[GpuModel, ...]  # per node

    @property
    def n_gpus(self) -> int:
        return len(self.uuids)

    def model(self, g: int) -> GpuModel:
        return self.model_of[int(self.node_of[g])]

    def gpu_type(self, g: int) -> str:
        """The GRES type of GPU `g` (`h100`, `a100`), as Slurm records an allocation's."""
        model = self.model(g)
        return next(key for key, m in MODELS.items() if m == model)


def make_fleet(
    cluster: str, n_gpus: int, rng: np.random.Generator, gpus_per_node: int = 8
) -> Fleet:
    """A fleet of ceil(n_gpus / 8) nodes of H100 80GB; fleets over 128 GPUs add an A100 island."""
    n_nodes = max(1, -(-n_gpus // gpus_per_node))
    names = tuple(f"gpu-{i + 1:03d}" for i in range(n_nodes))
    n_a100 = n_nodes // 8 if n_gpus > 128 else 0
    models = tuple(
        MODELS["a100"] if i >= n_nodes - n_a100 else MODELS["h100"] for i in range(n_nodes)
    )
    total = n_nodes * gpus_per_node
    node_of = np.repeat(np.arange(n_nodes, dtype=np.int32), gpus_per_node)
    index_of = np.tile(np.arange(gpus_per_node, dtype=np.int16), n_nodes)
    uuids = tuple(f"GPU-{uuid.UUID(bytes=rng.bytes(16), version=4)}" for _ in range(total))
    return Fleet(cluster, names, gpus_per_node, node_of, index_of, uuids, models)


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    share: float  # fair-share entitlement (normalised to sum 1)
    pretrain: bool  # runs the big multi-node pre-training jobs
    raw_shares: int  # the entitlement as Slurm's RawShares (FairShare=N of its association)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: int
    account: str
    activity: float  # relative rate of job submissions
    wasteful: bool  # chronically submits idle, partial or oversized jobs


_ACCOUNTS = (
    ("llm-pretrain", 30, True),
    ("nlp-research", 20, False),
    ("vision", 15, False),
    ("speech", 10, False),
    ("platform", 10, False),
    ("robotics", 10, False),
    ("students", 5, False),
)
_FIRST = (
    "alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil "
    "trent victor wendy xavier yusuf zoe amir bianca chen dmitri elena farah gustavo hana ines "
    "jonas kenji lena mateo noor omar priya quinn rosa sven tariq uma vera wei ximena yara"
).split()


def make_population(
    rng: np.random.Generator, n_users: int = 40
) -> tuple[list[Account], list[User]]:
    """Accounts with entitlements and users spread over them; ~12% of users are wasteful."""
    total = sum(s for _, s, _ in _ACCOUNTS)
    accounts = [Account(n, s / total, p, s) for n, s, p in _ACCOUNTS]
    weights = np.array([a.share for a in accounts]) ** 0.7
    weights /= weights.sum()
    users = []
    for i in range(n_users):
        account = (
            accounts[int(rng.choice(len(accounts), p=weights))]
            if i >= len(accounts)
            else accounts[i]
        )
        users.append(
            User(
                name=_FIRST[i % len(_FIRST)] + ("" if i < len(_FIRST) else str(i)),
                uid=2001 + i,
                account=account.name,
                activity=float(rng.lognormal(0.0, 0.6)),
                wasteful=bool(rng.random() < 0.12),
            )
        )
    return accounts, users
