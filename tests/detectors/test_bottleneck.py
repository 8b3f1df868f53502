"""Bottleneck diagnosis on a hand-made lake: one job per limiter, signals computed by hand."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.bottleneck import ADVICE, BottleneckThresholds, classify, diagnose
from tests.detectors.rules.lake import EMPTY, connection
from tests.infra.examples import examples
from tests.marts import rows as r

TIMES = list(range(0, 600, 30))  # 20 samples of 30 s on each GPU, inside the job's [0, 600)
N = len(TIMES)
# busy 0.02, 0.02, 0.6, 0.02, 0.02, 0.6, ...: a burst every third sample
BURSTY = [0.6 if i % 3 == 2 else 0.02 for i in range(N)]

JOBS = {
    "compute": dict(engine_active=0.85, sm_active=0.8, tensor_active=0.4, dram_active=0.3),
    "memory": dict(engine_active=0.35, sm_active=0.3, tensor_active=0.05, dram_active=0.7),
    "comm": dict(
        engine_active=0.3, sm_active=0.3, dram_active=0.2, nvlink_tx_bps=15e9, nvlink_rx_bps=15e9
    ),
    "input": dict(engine_active=BURSTY, sm_active=BURSTY, dram_active=0.1),
    "idle": dict(engine_active=0.0, sm_active=0.0, gpu_util_pct=0.0),
    "hung": dict(engine_active=0.002, sm_active=0.002, gpu_util_pct=100.0),
    "small": dict(engine_active=0.15, sm_active=0.15, dram_active=0.1),
    "noprof": dict(gpu_util_pct=80.0),
    # trained for a fifth of its run, then hung (kernels resident, SMs idle): "underutilized:
    # raise the batch size" beside its critical hung_job finding; and one that went idle
    "trained_then_hung": dict(
        engine_active=[0.6] * 4 + [0.002] * (N - 4),
        sm_active=[0.6] * 4 + [0.002] * (N - 4),
        gpu_util_pct=[90.0] * 4 + [100.0] * (N - 4),
    ),
    "trained_then_idle": dict(
        engine_active=[0.6] * 4 + [0.002] * (N - 4),
        sm_active=[0.6] * 4 + [0.002] * (N - 4),
        gpu_util_pct=[90.0] * 4 + [0.0] * (N - 4),
    ),
}


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    root = tmp_path_factory.mktemp("lake")
    samples, jobs, job_gpus = [], [], []
    for i, (job_id, fields) in enumerate(JOBS.items()):
        samples += r.samples(TIMES, gpu_index=i, **fields)
        jobs.append(r.job(job_id, 0, 600))
        job_gpus.append(r.job_gpu(job_id, 0, 600, gpu_index=i))
    jobs.append(r.job("nodata", 0, 600))
    return r.build_lake(root, samples=samples, jobs=jobs, job_gpus=job_gpus)


def by_job(table) -> dict[str, dict]:
    return {row["job_id"]: row for row in table.to_pylist()}


def test_each_job_gets_the_limiter_its_counters_show(con):
    got = by_job(diagnose(con))

    assert {j: got[j]["diagnosis"] for j in JOBS} == {
        "compute": "compute_bound",
        "memory": "memory_bound",
        "comm": "communication_bound",
        "input": "input_bound",
        "idle": "idle",
        "hung": "stalled",
        "small": "underutilized",
        "noprof": "unprofiled",
        "trained_then_hung": "stalled",
        "trained_then_idle": "underutilized",
    }
    assert all(row["advice"] == ADVICE[row["diagnosis"]] for row in got.values())
    assert "nodata" not in got  # no samples, not asked for


def test_signals_of_the_bursty_job_by_hand(con):
    [row] = diagnose(con, ["input"]).to_pylist()

    assert row["samples"] == N
    assert row["observed_h"] == pytest.approx(N * 30 / 3600)
    # 14 of 20 samples at 0.02 (< gap 0.1), 6 at 0.6 (>= burst 0.25)
    assert row["gap_frac"] == pytest.approx(14 / 20)
    assert row["burst_frac"] == pytest.approx(6 / 20)
    assert row["idle_frac"] == 0  # 0.02 is not below the idle threshold 0.01
    # 6 gap→burst steps in 600 s of one GPU = 36 per GPU-hour
    assert row["bursts_per_h"] == pytest.approx(36.0)
    assert row["busy_mean"] == pytest.approx((14 * 0.02 + 6 * 0.6) / 20, rel=1e-6)


def test_nvlink_rate_is_per_gpu_in_gb_per_s(con):
    [row] = diagnose(con, ["comm"]).to_pylist()

    assert row["nvlink_gbps_mean"] == pytest.approx(30.0)
    assert row["sm_active_mean"] == pytest.approx(0.3, rel=1e-6)


def test_a_job_asked_for_without_samples_is_unobserved(con):
    got = by_job(diagnose(con, ["nodata", "idle"]))

    assert got["nodata"]["diagnosis"] == "unobserved"
    assert got["idle"]["diagnosis"] == "idle"


def test_an_empty_lake_gives_an_empty_table(tmp_path):
    con = r.build_lake(tmp_path)

    assert diagnose(con).num_rows == 0
    assert diagnose(con, []).num_rows == 0


def test_thresholds_move_the_boundaries(con):
    strict = BottleneckThresholds(compute_sm_above=0.9, compute_tensor_above=0.9)

    # SM 0.8 is no longer compute-bound and matches nothing else: mixed
    assert by_job(diagnose(con, ["compute"], strict))["compute"]["diagnosis"] == "mixed"


signal = st.one_of(st.none(), st.floats(0, 1))


@given(
    rows=st.lists(
        st.tuples(signal, signal, signal, signal, st.floats(0, 100), st.floats(0, 60)),
        max_size=20,
    ),
    low=st.floats(0, 0.5),
    extra=st.floats(0, 0.5),
)
def test_raising_the_idle_threshold_never_makes_an_idle_job_busy(rows, low, extra):
    frame = pl.DataFrame(
        {
            "samples": [10] * len(rows),
            "busy_mean": [x[0] for x in rows],
            "sm_active_mean": [x[1] for x in rows],
            "tensor_active_mean": [x[2] for x in rows],
            "dram_active_mean": [x[3] for x in rows],
            "gpu_util_pct_mean": [x[4] for x in rows],
            "nvlink_gbps_mean": [x[5] for x in rows],
            "gap_frac": [x[0] for x in rows],
            "burst_frac": [x[1] for x in rows],
            "bursts_per_h": [x[5] for x in rows],
        },
        schema_overrides={"samples": pl.Int64},
    )
    idle_kinds = {"idle", "stalled"}
    before = classify(frame, BottleneckThresholds(idle_busy_below=low))["diagnosis"].to_list()
    after = classify(frame, BottleneckThresholds(idle_busy_below=low + extra))["diagnosis"]

    assert all(d in ADVICE for d in before)
    assert all(b not in idle_kinds or a in idle_kinds for b, a in zip(before, after, strict=True))


def test_actionable_diagnoses_become_findings_with_stable_ids(con):
    from detectors.bottleneck_findings import bottleneck_findings

    now = r.T0 + dt.timedelta(days=1)
    first = {f["job_id"]: f for f in bottleneck_findings(con, now, r.T0).to_pylist()}
    again = bottleneck_findings(con, now + dt.timedelta(hours=1), r.T0)

    assert {j: f["severity"] for j, f in first.items()} == {
        "input": "warn",
        "memory": "info",
        "comm": "info",
        "small": "info",
        "trained_then_idle": "info",
    }  # (stalled is the hung_job rule's to say: "raise the batch size" beside it contradicted)
    assert "trained_then_hung" not in first
    # the bursty job: 1/6 GPU-h allocated, busy (14 × 0.02 + 6 × 0.6) / 20 = 0.194
    assert first["input"]["gpu_h_at_stake"] == pytest.approx((1 - 0.194) / 6, rel=1e-5)
    assert first["input"]["message"].startswith("Job input (alice) is input-bound: ")
    assert sorted(again.column("finding_id").to_pylist()) == sorted(
        f["finding_id"] for f in first.values()
    )


def test_no_jobs_in_the_window_no_findings(con):
    from detectors.bottleneck_findings import bottleneck_findings

    assert bottleneck_findings(con, r.T0, r.T0 - dt.timedelta(days=1)).num_rows == 0


def test_bursts_are_counted_along_each_gpu_in_time_order(tmp_path):
    # "pair": GPU 0 bursts after every two gap samples (6 steps), GPU 1 alternates burst and
    # gap (9 steps); their samples interleave in time, so steps counted across the two GPUs
    # would differ. "holes": a sample without any busy field sits between each gap sample
    # and the burst after it, so it has no gap→burst step. Rows land out of time order.
    alternating = [0.6 if i % 2 == 0 else 0.02 for i in range(N)]
    holes = [(0.02, None, 0.6)[i % 3] for i in range(N)]
    samples = (
        r.samples(TIMES, gpu_index=0, engine_active=BURSTY)
        + r.samples(TIMES, gpu_index=1, engine_active=alternating)
        + r.samples(TIMES, gpu_index=2, engine_active=holes)
    )
    con = r.build_lake(
        tmp_path,
        samples=samples[::-1],
        jobs=[r.job("pair", 0, 600, gpus=2), r.job("holes", 0, 600)],
        job_gpus=[r.job_gpu("pair", 0, 600, gpu_index=i) for i in (0, 1)]
        + [r.job_gpu("holes", 0, 600, gpu_index=2)],
    )
    got = by_job(diagnose(con, ["pair", "holes"]))

    assert got["pair"]["gpus_observed"] == 2
    assert got["pair"]["samples"] == 2 * N
    # 6 + 9 steps in 2 × 600 s = 1/3 GPU-hour
    assert got["pair"]["bursts_per_h"] == pytest.approx(15 * 3)
    assert got["holes"]["bursts_per_h"] == 0
    # 13 of 20 samples carry a busy value: 7 at 0.02, 6 at 0.6
    assert got["holes"]["gap_frac"] == pytest.approx(7 / 13)
    assert got["holes"]["burst_frac"] == pytest.approx(6 / 13)


def test_gpus_that_cannot_be_told_apart_give_the_same_signals_whatever_order_they_land_in(
    tmp_path,
):
    # two GPUs of a node naming neither UUID nor index (one device to the signals), one busy
    # and one in a gap at every time: their samples of a time are taken busiest first, so each
    # step from one time to the next is a gap→burst step (N - 1 of them), however the rows land
    nameless = {"gpu_uuid": None, "gpu_index": None}
    samples = [
        row | nameless
        for busy in (0.9, 0.02)
        for row in r.samples(TIMES, gpu_index=0, engine_active=busy)
    ]
    got = []
    for n, landed in enumerate((samples, samples[::-1], samples[1::2] + samples[::2])):
        con = r.build_lake(
            tmp_path / str(n),
            samples=landed,
            jobs=[r.job("node", 0, 600, gpus=2)],
            job_gpus=[r.job_gpu("node", 0, 600, gpu_index=None, with_uuid=False)],
        )
        got.append(by_job(diagnose(con, ["node"]))["node"])
    assert got[0] == got[1] == got[2]
    assert got[0]["bursts_per_h"] == pytest.approx((N - 1) / (2 * N * 30 / 3600))


BUSY = [None, 0.0, 0.005, 0.05, 0.2, 0.3, 0.9]


@st.composite
def owned_lakes(draw):
    """Three GPUs of node g001 sampled at distinct times over an hour, each held by two jobs one
    after the other (split at a drawn time), and a third job on GPUs 0 and 1 at the end, from a
    drawn time that may come before the second jobs end (the GPUs are then shared); node g002
    held whole by one job, with a GPU that reports neither UUID nor index."""
    samples, job_gpus = [], []

    def sampled(node, gpu_index, **fields):
        times = draw(st.lists(st.integers(0, 119), min_size=1, max_size=30, unique=True))
        busy = draw(st.lists(st.sampled_from(BUSY), min_size=len(times), max_size=len(times)))
        interval = float(draw(st.sampled_from([30, 60])))
        return [
            row | fields
            for row in r.samples(
                [t * 30 for t in times],
                node=node,
                gpu_index=gpu_index,
                interval_s=interval,
                engine_active=busy,
            )
        ]

    for gpu in range(3):
        samples += sampled("g001", gpu)
        split = draw(st.integers(1, 100)) * 30
        end = 3000 if gpu < 2 else 3600
        job_gpus += [r.job_gpu(f"a{gpu}", 0, split, gpu_index=gpu)]
        job_gpus += [r.job_gpu(f"b{gpu}", split, end, gpu_index=gpu)]
    wide = draw(st.integers(90, 100)) * 30
    job_gpus += [r.job_gpu("wide", wide, 3600, gpu_index=g) for g in (0, 1)]
    samples += sampled("g002", 0) + sampled("g002", None, gpu_uuid=None)
    job_gpus += [r.job_gpu("node", 0, 3600, node="g002", gpu_index=None, with_uuid=False)]
    return samples, job_gpus


def _device(s) -> str | None:
    """A sample's GPU as the signals name it: its UUID, else node/index (none without both)."""
    if s["gpu_uuid"] is not None:
        return s["gpu_uuid"]
    return None if s["gpu_index"] is None else f"{s['node']}/{s['gpu_index']}"


def signals_by_definition(samples, job_gpus, t: BottleneckThresholds) -> dict[str, dict]:
    """Each job's signals from its definition: a sample is the job's whose allocation (of its
    GPU, or of its whole node) covers its time, and it weighs its interval split evenly among
    the jobs it is (as the marts split a shared GPU's time); bursts are gap→burst steps along
    each GPU's samples of the job in time order (the samples naming no GPU count as one)."""
    per_job: dict[str, dict[str | None, list]] = {}
    for s in samples:
        owners = [
            g["job_id"]
            for g in job_gpus
            if g["node"] == s["node"]
            and g["gpu_index"] in (None, s["gpu_index"])
            and g["start_ts"] <= s["ts"] < g["end_ts"]
        ]
        for job_id in owners:
            mine = s | {"w": s["interval_s"] / len(owners)}
            per_job.setdefault(job_id, {}).setdefault(_device(s), []).append(mine)
    out = {}
    for job_id, gpus in per_job.items():
        rows = [s for g in gpus.values() for s in g]
        known = [s for s in rows if s["engine_active"] is not None]
        known_h = sum(s["w"] for s in known) / 3600

        def frac(test, known=known):
            weight = sum(s["w"] for s in known)
            return sum(s["w"] for s in known if test(s["engine_active"])) / weight

        steps = 0
        for g in gpus.values():
            busy = [s["engine_active"] for s in sorted(g, key=lambda s: s["ts"])]
            steps += sum(
                a is not None and b is not None and a < t.gap_below and b >= t.burst_above
                for a, b in zip(busy, busy[1:], strict=False)
            )
        out[job_id] = {
            "gpus_observed": sum(device is not None for device in gpus),
            "samples": len(rows),
            "observed_h": sum(s["w"] for s in rows) / 3600,
            "busy_mean": sum(s["engine_active"] * s["w"] for s in known) / (known_h * 3600)
            if known
            else None,
            "idle_frac": frac(lambda b: b < t.idle_below) if known else None,
            "gap_frac": frac(lambda b: b < t.gap_below) if known else None,
            "burst_frac": frac(lambda b: b >= t.burst_above) if known else None,
            "bursts_per_h": steps / known_h if known else None,
        }
    return out


@settings(max_examples=examples(40), deadline=None)
@given(lake=owned_lakes())
def test_each_jobs_signals_are_their_definition(lake):
    samples, job_gpus = lake
    con = connection(EMPTY, gpu_samples=samples, job_gpus=job_gpus)
    t = BottleneckThresholds()
    got = by_job(diagnose(con, None, t))
    want = signals_by_definition(samples, job_gpus, t)

    assert set(got) == set(want)
    for job_id, expected in want.items():
        for column, value in expected.items():
            assert got[job_id][column] == (
                value if value is None else pytest.approx(value, rel=1e-6)
            ), (job_id, column)
