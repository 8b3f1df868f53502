"""Property: making any threshold stricter never adds a finding, in every rule family.

For each family, Hypothesis draws small hand-made inputs, a base configuration (every
threshold scaled from its default) and a stricter one (some thresholds moved up where they are
minimums, down where they are maximums, as each field's metadata says); the findings of the
stricter run must be a subset of the base run's, by finding_id.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.rules import (
    FAMILIES,
    RuleConfig,
    efficiency,
    gpu_balance,
    health,
    health_trend,
    idle,
    mapping,
    mfu,
    resilience,
    stranded,
)
from detectors.rules.base import threshold_docs
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import (
    CLUSTER,
    EMPTY,
    H100,
    at,
    bucket,
    connection,
    device_day,
    job,
    replace_views,
    usage,
)
from tests.infra.examples import examples

NOW = at(3 * 86400)
SETTINGS = settings(max_examples=examples(25), deadline=None)
_f = st.floats(0, 1, allow_nan=False)


def _scaled(value, factor):
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(0, round(value * factor))
    return value * factor


@st.composite
def configs(draw, family: str):
    """(base, stricter) RuleConfigs: some thresholds of `family` moved the stricter way.

    Each movable threshold is tightened or left alone at random; since each one alone may
    only remove findings, so may any combination, and one example exercises several.
    """
    kind = FAMILIES[family]
    base_values = {
        name: _scaled(default, draw(st.floats(0.25, 2.0)))
        for name, default, _, _ in threshold_docs(kind)
    }
    tight_values = dict(base_values)
    for name, _, _, direction in threshold_docs(kind):
        if direction is None or draw(st.integers(0, 2)):  # tighten about a third of them
            continue
        value = base_values[name]
        if isinstance(value, int):
            step = draw(st.integers(1, 3))
        else:
            # a share of the value, so a maximum never crosses zero and wipes everything out
            step = draw(st.floats(0.05, 0.9)) * (value if value > 0 else 1.0)
        tight_values[name] = value + step if direction == "up" else value - step
    base = dataclasses.replace(RuleConfig(), **{family: kind(**base_values)})
    tight = dataclasses.replace(base, **{family: kind(**tight_values)})
    return base, tight


def ids(con, config, rules):
    return set(run_rules(con, config, NOW, rules=rules).column("finding_id").to_pylist())


_CON = []


def assert_monotone(tables, pair, rules):
    # One connection for every example: each family's strategy sets all the views it reads.
    if not _CON:
        _CON.append(connection(EMPTY))
    con = replace_views(_CON[0], **tables)
    base, tight = pair
    assert ids(con, tight, rules) <= ids(con, base, rules)


# ---- inputs per family


# Runs of buckets in one kind: (busy, GPU_UTIL %, SM activity, memory MiB, power W)
KINDS = {
    "busy": (0.6, 95.0, 0.6, 40000.0, 400.0),
    "idle": (0.0, 0.0, 0.0, 500.0, 75.0),
    "noisy_idle": (0.005, 2.0, 0.005, 500.0, 80.0),
    "hold": (0.0, 0.0, 0.0, 70000.0, 80.0),
    "hung": (0.003, 100.0, 0.003, 70000.0, 110.0),
    "hung_no_sm": (1.0, 100.0, None, 70000.0, 110.0),
}


@st.composite
def job_buckets(draw):
    rows = []
    gpus = draw(st.integers(1, 2))
    i = 0
    for _ in range(draw(st.integers(0, 5))):
        kind = KINDS[draw(st.sampled_from(sorted(KINDS)))]
        for _ in range(draw(st.integers(1, 18))):
            busy, util, sm, fb, power = kind
            for g in range(gpus):
                row = bucket(
                    "1",
                    i * 300,
                    gpu_index=g,
                    busy=busy,
                    util_pct=util,
                    sm=sm,
                    fb_mib=fb,
                    power_w=power,
                )
                if sm is None:
                    row["sm_sum"], row["sm_known_s"] = None, 0.0
                rows.append(row)
            i += 1
    return rows


@given(rows=job_buckets(), pair=configs("idle"))
@SETTINGS
def test_idle_family(rows, pair):
    assert_monotone(
        {"gpu_job_buckets": rows, "jobs": [job("1", 0, 9000, gpus=2)]}, pair, idle.RULES
    )


@st.composite
def device_days(draw):
    rows, jobs = [], []
    for j in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 4))
        observed = draw(st.sampled_from([30.0, 600.0, 3600.0, 7200.0]))
        for g in range(n):
            busy = draw(st.sampled_from([0.0, 0.2, 0.35, 0.5, 0.7]))
            rows.append(device_day(str(j), g, observed_s=observed, busy=busy))
        jobs.append(job(str(j), 0, observed, gpus=n))
    return {"job_gpu_daily": rows, "jobs": jobs}


@given(tables=device_days(), pair=configs("gpu_balance"))
@SETTINGS
def test_gpu_balance_family(tables, pair):
    assert_monotone(tables, pair, gpu_balance.RULES)


@st.composite
def job_lines(draw):
    usages, jobs, days = [], [], []
    for j in range(draw(st.integers(0, 5))):
        hours = draw(st.sampled_from([0.1, 1.0, 5.0, 40.0]))
        gpus = draw(st.integers(1, 4))
        busy = draw(_f)
        usages.append(
            usage(
                str(j),
                0,
                hours * 3600,
                user=draw(st.sampled_from(["a", "b", "c"])),
                gpus=gpus,
                alloc_gpu_h=hours * gpus,
                observed_gpu_h=hours * gpus * draw(_f),
                effective_gpu_h=hours * gpus * busy,
                busy_mean=busy,
                sm_active_mean=draw(st.sampled_from([None, busy])),
                fb_used_mib_max=81559 * draw(_f),
                power_w_mean=draw(st.floats(60, 700)),
            )
        )
        jobs.append(
            job(str(j), 0, hours * 3600, gpus=gpus, time_limit_s=draw(st.integers(60, 10**6)))
        )
        days.append(device_day(str(j), 0, observed_s=hours * 3600, busy=busy))
    return {"job_usage": usages, "jobs": jobs, "job_gpu_daily": days}


@given(tables=job_lines(), pair=configs("efficiency"))
@SETTINGS
def test_efficiency_family(tables, pair):
    assert_monotone(tables, pair, efficiency.RULES)


@given(tables=job_lines(), pair=configs("power"))
@SETTINGS
def test_power_family(tables, pair):
    assert_monotone(tables, pair, efficiency.RULES)


@st.composite
def training_lines(draw):
    usages = []
    for j in range(draw(st.integers(0, 5))):
        hours = draw(st.sampled_from([0.1, 1.0, 5.0, 40.0]))
        gpus = draw(st.sampled_from([1, 4, 8, 16, 32]))
        usages.append(
            usage(
                str(j),
                0,
                hours * 3600,
                gpus=gpus,
                alloc_gpu_h=hours * gpus,
                model_params=draw(st.sampled_from([None, 10**9])),
                tokens_per_s_per_gpu=1000.0,
                mfu=draw(st.one_of(st.none(), _f)),
            )
        )
    return {"job_usage": usages}


@given(tables=training_lines(), pair=configs("mfu"))
@SETTINGS
def test_mfu_family(tables, pair):
    assert_monotone(tables, pair, mfu.RULES)


@given(tables=job_lines(), pair=configs("mapping"))
@SETTINGS
def test_mapping_family(tables, pair):
    assert_monotone(tables, pair, mapping.RULES)


@st.composite
def health_inputs(draw):
    samples = []
    for m in range(draw(st.integers(0, 36))):
        samples.append(
            {
                "ts": at(m * 300),
                "cluster": CLUSTER,
                "node": "g001",
                "gpu_index": 0,
                "gpu_uuid": "GPU-a",
                "model": H100,
                "interval_s": 300.0,
                "gpu_util_pct": draw(st.sampled_from([0.0, 100.0])),
                "sm_clock_mhz": draw(st.sampled_from([1000.0, 1980.0])),
                "clock_event_reasons": draw(st.sampled_from([0, 0x4, 0x8, 0x40, 0x80])),
                "ecc_dbe_volatile": draw(st.integers(0, 3)),
                "remap_pending": draw(st.booleans()),
                "remap_failure": draw(st.booleans()),
                "source": "test",
            }
        )
    events = [
        {
            "cluster": CLUSTER,
            "node": "g001",
            "gpu_uuid": "GPU-a",
            "gpu_index": 0,
            "ts": at(draw(st.integers(0, 86400))),
            "kind": draw(st.sampled_from(["xid", "ecc_dbe", "row_remap_failure"])),
            "code": draw(st.sampled_from([13, 31, 48, 79, 92, 94, 95, 999])),
        }
        for _ in range(draw(st.integers(0, 6)))
    ]
    return {"gpu_samples": samples, "gpu_events": events}


@given(tables=health_inputs(), pair=configs("health"))
@SETTINGS
def test_health_family(tables, pair):
    assert_monotone(tables, pair, health.RULES)


@st.composite
def ecc_trends(draw):
    """Corrected-ECC counters of three GPUs over 20 h (climbs, bursts, resets) and a few
    precursor XIDs."""
    samples = []
    for g in range(3):
        count = draw(st.integers(0, 5))
        for m in range(80):
            step = draw(st.sampled_from([0, 0, 0, 0, 1, 2, -1]))
            count = 0 if step < 0 else count + step
            samples.append(
                {
                    "ts": at(m * 900),
                    "cluster": CLUSTER,
                    "node": "g001",
                    "gpu_index": g,
                    "gpu_uuid": f"GPU-{g}",
                    "model": H100,
                    "interval_s": 900.0,
                    "ecc_sbe_volatile": count,
                    "source": "test",
                }
            )
    events = [
        {
            "cluster": CLUSTER,
            "node": "g001",
            "gpu_uuid": f"GPU-{draw(st.integers(0, 2))}",
            "gpu_index": 0,
            "ts": at(draw(st.integers(0, 72000))),
            "kind": "xid",
            "code": draw(st.sampled_from([63, 92, 119, 120, 79])),
        }
        for _ in range(draw(st.integers(0, 4)))
    ]
    return {"gpu_samples": samples, "gpu_events": events}


@given(tables=ecc_trends(), pair=configs("health_trend"))
@SETTINGS
def test_health_trend_family(tables, pair):
    assert_monotone(tables, pair, health_trend.RULES)


@st.composite
def outcomes(draw):
    rows, jobs = [], []
    for j in range(draw(st.integers(0, 6))):
        gpus = draw(st.sampled_from([1, 8, 16]))
        hours = draw(st.sampled_from([1.0, 10.0, 30.0]))
        outcome = draw(st.sampled_from(["completed", "failed", "node_fail"]))
        failed = outcome != "completed"
        rows.append(
            {
                "cluster": CLUSTER,
                "job_id": str(j),
                "account": draw(st.sampled_from(["a", "b"])),
                "outcome": outcome,
                "failed": failed,
                "requeued": draw(st.booleans()),
                "alloc_gpu_h": gpus * hours,
                "gpu_h_lost": gpus * hours if failed else 0.0,
                "gpu_h_lost_requeue": 0.0,
                "hw_event_before_end": draw(st.booleans()),
            }
        )
        jobs.append(job(str(j), 0, hours * 3600, gpus=gpus))
    return {"job_outcomes": rows, "jobs": jobs}


@given(tables=outcomes(), pair=configs("resilience"))
@SETTINGS
def test_resilience_family(tables, pair):
    assert_monotone(tables, pair, resilience.RULES)


@st.composite
def host_requests(draw):
    jobs = []
    for j in range(draw(st.integers(0, 6))):
        start = draw(st.integers(0, 5)) * 3600
        gpus = draw(st.integers(1, 8))
        jobs.append(
            job(
                str(j),
                start,
                start + draw(st.integers(1, 4)) * 1800,
                gpus=gpus,
                cpus=draw(st.integers(1, 96)),
                mem_req_mib=draw(st.integers(1, 8)) * 10240,
                nodes=["g001"],
            )
        )
    return {"jobs": jobs}


@given(tables=host_requests(), pair=configs("stranded"))
@SETTINGS
def test_stranded_family(tables, pair):
    assert_monotone(tables, pair, stranded.RULES)


def test_every_family_has_a_property_test_and_every_threshold_a_doc():
    tested = {name.removeprefix("test_").removesuffix("_family") for name in globals()}
    assert set(FAMILIES) <= tested
    for kind in FAMILIES.values():
        for name, _, doc, _ in threshold_docs(kind):
            assert doc, f"{kind.__name__}.{name} has no documentation"
