"""Thresholds of every recommender: frozen dataclasses with unit-bearing names and defaults.

Defaults follow the practice cited in shared/reference/fairness-policy-prediction.md §2.2
(Job Defense Shield, Princeton, Northeastern); each field says what it changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "KIND_FIELDS",
    "BillingConfig",
    "DrainConfig",
    "FairshareConfig",
    "GpuCapConfig",
    "IdleCancelConfig",
    "MigPackingConfig",
    "PowerCapConfig",
    "RecommendConfig",
    "TimeLimitConfig",
]

# Every recommender's kind (the `kind` of its recommendations, its `[recommend.<kind>]` table)
# and the RecommendConfig field of its thresholds, in the order the recommenders run
# (detectors/recommend/run.py builds KINDS from it; a test holds the two to each other).
KIND_FIELDS: dict[str, str] = {
    "idle_cancel_policy": "idle_cancel",
    "time_limit": "time_limit",
    "gpu_cap": "gpu_cap",
    "fairshare_weight": "fairshare",
    "gpu_billing": "billing",
    "mig_packing": "mig_packing",
    "drain_node": "drain",
    "power_cap": "power_cap",
}


@dataclass(frozen=True, slots=True)
class IdleCancelConfig:
    """Replay of "warn after X, cancel after Y minutes of full idleness" on the lake's history.

    `candidates` are (warn_min, cancel_min) pairs; the recommended one recovers the most
    GPU-hours among those whose false-kill rate (cancelled jobs that were active again after
    the cancel point) is at most `max_false_kill_rate`. The width of the gpu_job_buckets mart is
    read from the lake (`gpuledger attribute --bucket` built it); `bucket_s` stands in where the
    lake cannot tell it (no cluster with two buckets).
    """

    candidates: tuple[tuple[int, int], ...] = ((60, 120), (15, 60), (120, 240), (240, 300))
    max_false_kill_rate: float = 0.05
    min_gain_gpu_h: float = 1.0
    bucket_s: int = 300


@dataclass(frozen=True, slots=True)
class TimeLimitConfig:
    """Partition DefaultTime/MaxTime and per-user --time hints from completed jobs' run times.

    The proposed default is the partition's `quantile` run time × `margin`, rounded up to
    `round_s`; the proposed maximum is its longest run × `margin`, rounded up to an hour.
    A user gets a hint when their median run time / limit is at most `user_max_ratio` and the
    unused limit is at least `user_min_unused_gpu_h` GPU-hours over `min_jobs` jobs or more.
    """

    quantile: float = 0.9
    margin: float = 1.2
    round_s: int = 900
    min_jobs: int = 5
    user_max_ratio: float = 0.2
    user_min_unused_gpu_h: float = 10.0


@dataclass(frozen=True, slots=True)
class GpuCapConfig:
    """GPU caps (GrpTRES) for users and accounts that held more than a share of the cluster.

    The cap is `cap_share` (a user) or `account_cap_share` (an account) of the cluster's GPUs,
    rounded up, never below the largest job; a cap is proposed when the GPU-hours held above
    it reach `min_excess_gpu_h` while at least `min_waiting_jobs` jobs of others waited.
    """

    cap_share: float = 0.25
    account_cap_share: float = 0.5
    min_excess_gpu_h: float = 1.0
    min_waiting_jobs: int = 1


@dataclass(frozen=True, slots=True)
class FairshareConfig:
    """Fair-share weights that follow demand: raw shares per account (None = equal shares).

    An account is flagged when its demand share (allocated + waited GPU-hours) is at least
    `ratio` times, or at most 1/`ratio` times, its entitled share; the proposal moves its
    raw shares halfway toward its demand share. An under-served account (usage share at most
    1/`ratio` of its share while its jobs waited `min_waited_gpu_h` or more) is never cut, and
    no share is raised while one is.
    """

    shares: Mapping[str, float] | None = None
    ratio: float = 2.0
    min_demand_gpu_h: float = 1.0
    min_waited_gpu_h: float = 1.0


@dataclass(frozen=True, slots=True)
class BillingConfig:
    """TRESBillingWeights with GPUs billed: GRES/gpu weight in CPU units.

    `gpu_weight` None derives it as the most CPUs any job took per GPU (a whole node's CPUs
    per GPU), so a GPU costs at least the CPUs that come with it. Proposed when some
    account's CPU-only billing share differs from its GPU-hour share by `min_share_gap`.
    """

    gpu_weight: float | None = None
    min_share_gap: float = 0.1


@dataclass(frozen=True, slots=True)
class MigPackingConfig:
    """Single-GPU jobs small enough for a MIG slice (Job Defense Shield's gpu-model-too-powerful).

    A job qualifies with busy_mean below `busy_below` and peak memory at most `fb_max_mib`;
    it needs the smallest profile with g/7 ≥ busy and memory ≥ peak × `fb_headroom`.
    Proposed when the candidates held `min_gpu_h` GPU-hours or more.
    """

    busy_below: float = 0.2
    fb_max_mib: float = 10240.0
    fb_headroom: float = 1.2
    min_gpu_h: float = 24.0


@dataclass(frozen=True, slots=True)
class DrainConfig:
    """Drain nodes with hardware errors or a failure rate far above the cluster's ("lemons").

    A node is proposed with `min_hw_events` hardware events (fatal XIDs, ECC DBE, row-remap
    failure, GPU offline) or critical hardware findings, or with `min_failures` failed jobs
    at `lemon_ratio` × the cluster's failure rate or more. Hardware trouble no longer counts
    once the node has run `healthy_jobs` jobs to a successful end after it (back in service).
    """

    min_hw_events: int = 1
    min_failures: int = 3
    lemon_ratio: float = 2.0
    healthy_jobs: int = 1


@dataclass(frozen=True, slots=True)
class PowerCapConfig:
    """GPU power caps for partitions whose GPU-hours are mostly low-activity.

    Jobs with SM activity below `sm_below` lose little speed under a cap of `cap_frac` of the
    board limit; a partition qualifies when such jobs held `min_low_share` of its GPU-hours
    and the cap would have saved `min_kwh` or more.
    """

    sm_below: float = 0.3
    cap_frac: float = 0.6
    min_low_share: float = 0.5
    min_kwh: float = 1.0


@dataclass(frozen=True, slots=True)
class RecommendConfig:
    """Every recommender's thresholds and the replayed window (`lookback_days` before now)."""

    lookback_days: float = 28.0
    idle_cancel: IdleCancelConfig = field(default_factory=IdleCancelConfig)
    time_limit: TimeLimitConfig = field(default_factory=TimeLimitConfig)
    gpu_cap: GpuCapConfig = field(default_factory=GpuCapConfig)
    fairshare: FairshareConfig = field(default_factory=FairshareConfig)
    billing: BillingConfig = field(default_factory=BillingConfig)
    mig_packing: MigPackingConfig = field(default_factory=MigPackingConfig)
    drain: DrainConfig = field(default_factory=DrainConfig)
    power_cap: PowerCapConfig = field(default_factory=PowerCapConfig)
