"""The simulator's hard setting and failure rate: the same jobs and failures as the default,
with less warning, healthy GPUs that log corrected errors, and GSP XIDs before bus failures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collector.errors import ConfigError
from collector.sim import SimConfig, simulate
from collector.sim.health import GSP_XIDS
from collector.sim.runner import build_world
from collector.sim.workload import HOUR_S
from warehouse.connection import connect
from warehouse.lake import Lake

BASE = SimConfig(gpus=64, days=7, seed=5, failure_rate=6.0)
HARD = SimConfig(gpus=64, days=7, seed=5, failure_rate=6.0, hard=True)


def world(cfg: SimConfig):
    return build_world(cfg, np.random.default_rng([cfg.seed, 1]))


def test_hard_keeps_the_jobs_and_the_failures_but_gives_less_warning():
    base, hard = world(BASE), world(HARD)
    assert [(j.job_id, j.start_s, j.end_s) for j in base.jobs] == [
        (j.job_id, j.start_s, j.end_s) for j in hard.jobs
    ]
    assert [(f.gpu, f.fail_s, f.xid) for f in base.health.failures] == [
        (f.gpu, f.fail_s, f.xid) for f in hard.health.failures
    ]
    for f in base.health.failures:
        assert 18 * HOUR_S - 1 <= f.fail_s - f.degrade_s <= 60 * HOUR_S + 1
    for f in hard.health.failures:
        assert 4 * HOUR_S - 1 <= f.fail_s - f.degrade_s <= 24 * HOUR_S + 1


def test_only_hard_has_benign_corrected_errors_and_gsp_xids():
    base, hard = world(BASE).health, world(HARD).health
    assert not base.benign_sbe and not base.precursor_xids
    failing = {f.gpu for f in hard.failures}
    assert hard.benign_sbe and not set(hard.benign_sbe) & failing
    bus = [f for f in hard.failures if f.xid == 79]
    for f in bus:
        before = [t for g, t, c in hard.precursor_xids if g == f.gpu and c in GSP_XIDS]
        assert before and all(f.degrade_s <= t < f.fail_s for t in before)
    healthy = {g for g, _, _ in hard.precursor_xids} - failing
    assert healthy  # healthy GPUs have GSP errors too: an XID alone is no verdict


def test_the_failure_rate_scales_the_number_of_failing_gpus():
    few = world(SimConfig(gpus=64, days=7, seed=5)).health.failures
    many = world(SimConfig(gpus=64, days=7, seed=5, failure_rate=10.0)).health.failures
    assert len(few) == 1 and len(many) == round(0.64 * 10)


@pytest.mark.parametrize("rate", [-1.0, 101.0])
def test_a_bad_failure_rate_is_refused(rate):
    with pytest.raises(ConfigError, match="failure_rate"):
        SimConfig(failure_rate=rate).validate()


@pytest.mark.slow
def test_hard_telemetry_shows_subtler_precursors(tmp_path: Path):
    lakes = {}
    for name, cfg in (("base", BASE), ("hard", HARD)):
        small = SimConfig(gpus=32, days=4, seed=5, failure_rate=12.0, hard=cfg.hard)
        simulate(small, Lake.at(tmp_path / name))
        lakes[name] = connect(tmp_path / name)
    query = """
        SELECT
            t.subject_id AS gpu,
            max(s.ecc_sbe_volatile) AS sbe_max,
            min(s.ts) FILTER (WHERE s.remap_pending) AS pending_from,
            any_value(t.end_ts) AS fail_ts
        FROM sim_truth AS t
        JOIN gpu_samples AS s ON s.gpu_uuid = t.subject_id AND s.ts < t.end_ts
        WHERE t.label = 'failing_gpu'
        GROUP BY t.subject_id
        ORDER BY gpu
    """
    base = lakes["base"].sql(query).pl()
    hard = lakes["hard"].sql(query).pl()
    assert base.height == hard.height > 0
    assert hard["sbe_max"].max() < 30 < base["sbe_max"].min()
    pending = hard.drop_nulls("pending_from")
    lead_h = (pending["fail_ts"] - pending["pending_from"]).dt.total_seconds() / 3600
    assert (lead_h <= 1.6).all()
    healthy_sbe = (
        lakes["hard"]
        .sql(
            """
        SELECT count(DISTINCT gpu_uuid) AS n FROM gpu_samples
        WHERE ecc_sbe_volatile > 0 AND gpu_uuid NOT IN (
            SELECT subject_id FROM sim_truth WHERE label = 'failing_gpu')
        """
        )
        .pl()["n"][0]
    )
    assert healthy_sbe >= 1


def test_hard_adds_periodic_kernels_bursty_services_late_hangs_and_util_only_nodes():
    base, hard = world(BASE), world(HARD)
    by_name = {j.job_id: j for j in base.jobs}
    polled = [j for j in hard.jobs if j.archetype.name == "idle" and j.poll_period_s]
    idle = [j for j in hard.jobs if j.archetype.name == "idle"]
    assert len(polled) >= 0.7 * len(idle) > 0
    assert all(15 * 60 <= j.poll_period_s <= 25 * 60 and 30 <= j.poll_len_s <= 60 for j in polled)
    services = [j for j in hard.jobs if j.archetype.name == "inference"]
    assert services and all(0.3 <= j.rest_frac <= 0.5 for j in services)
    for j in hard.jobs:
        if j.archetype.name == "hung" and j.hang_s is not None:
            assert j.hang_s >= (by_name[j.job_id].hang_s or 0.0)
            assert j.hang_s >= 0.35 * j.runtime_s - 1
    assert not any(j.poll_period_s or j.burst_period_s for j in base.jobs)
    assert len(hard.health.no_profiling) > len(base.health.no_profiling)
    assert len(hard.health.gaps) > len(base.health.gaps)


def test_hard_failing_gpus_climb_slowly_and_healthy_ones_have_sporadic_errors():
    health = world(HARD).health
    failing = {f.gpu: f for f in health.failures}
    early = late = 0
    for f in health.failures:
        steps = [(t, n) for g, t, n in health.sbe_steps if g == f.gpu]
        assert all(f.degrade_s <= t <= f.fail_s for t, _ in steps)
        errors = sum(n for _, n in steps)
        assert errors <= (6 if f.xid == 79 else 40)  # small: a handful, never a storm
        middle = (f.degrade_s + f.fail_s) / 2
        early += sum(n for t, n in steps if t < middle)
        late += sum(n for t, n in steps if t >= middle)
    assert late > 2 * early  # the climb accelerates towards the failure
    sporadic = {g for g, _, _ in health.sbe_steps} - set(failing)
    assert sporadic  # healthy GPUs log a few corrected errors too
    for g in sporadic:
        assert len([1 for h, _, _ in health.sbe_steps if h == g]) <= 2
    assert set(failing) <= set(health.driver_reloads)  # the repair reloads the driver
    assert len(health.gaps) > len(world(BASE).health.gaps)  # outages of tens of minutes


def test_the_volatile_counter_adds_the_steps_and_a_driver_reload_resets_it():
    from collector.sim.health import Health
    from collector.sim.telemetry import _corrected_errors

    health = Health(
        failures=[],
        thermal=[],
        gaps=[],
        no_profiling=frozenset(),
        energy_resets={},
        hard=True,
        benign_sbe={1: (10.0, 0.0)},
        sbe_steps=[(0, 100.0, 2), (0, 300.0, 1), (0, 700.0, 4)],
        driver_reloads={0: [500.0], 1: [200.0]},
    )
    t = np.array([[50.0, 150.0, 400.0, 600.0, 800.0]] * 2)
    sbe = _corrected_errors(health, np.array([0, 1]), t)
    assert sbe[0].tolist() == [0, 2, 3, 0, 4]  # steps add up; the reload at 500 s clears them
    assert sbe[1].tolist() == [10, 10, 0, 0, 0]  # a healthy GPU's old count, until its reload
