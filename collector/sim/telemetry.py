"""DCGM-like telemetry for the simulated fleet, one day and one slice of GPUs at a time.

Everything is vectorised over a (GPUs × sample times) grid; no Python loop runs per sample.
Values follow the shapes real clusters show (see shared/reference/dcgm.md and the AcmeTrace
distributions): GPU_UTIL near 100 % whenever a kernel runs while SM activity is far lower,
a third of samples fully idle, power from the idle floor up to the board limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from collector.sim.fleet import Fleet
from collector.sim.health import Health
from collector.sim.workload import CODE_OF, DAY_S, Job

__all__ = ["Allocations", "EnergyState", "XidTimeline", "make_allocations", "make_samples"]

_SHIFT = np.int64(1) << np.int64(42)  # key = gpu << 42 | ms: room for 139 years of ms
MIB_RESERVED = 512.0
CLOCK_IDLE = 0x1
CLOCK_SW_POWER_CAP = 0x4
CLOCK_SW_THERMAL = 0x20
CLOCK_HW_THERMAL = 0x40


@dataclass(frozen=True, slots=True)
class Allocations:
    """Every (job, GPU) interval in ms from the window start, sorted by (gpu, start)."""

    key: np.ndarray  # int64 gpu << 42 | start_ms
    gpu: np.ndarray
    start_ms: np.ndarray
    end_ms: np.ndarray
    job: np.ndarray  # index into the jobs list
    rank: np.ndarray  # position of the GPU in its job


def make_allocations(jobs: list[Job]) -> Allocations:
    rows = [
        (g, round(j.start_s * 1000), round(j.end_s * 1000), i, r)
        for i, j in enumerate(jobs)
        if j.start_s is not None and j.end_s is not None
        for r, g in enumerate(j.placement)
    ]
    arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
    arr = arr[np.lexsort((arr[:, 1], arr[:, 0]))]
    return Allocations(
        key=(arr[:, 0] << 42) | arr[:, 1],
        gpu=arr[:, 0],
        start_ms=arr[:, 1],
        end_ms=arr[:, 2],
        job=arr[:, 3],
        rank=arr[:, 4],
    )


@dataclass(frozen=True, slots=True)
class XidTimeline:
    """XID events per GPU (ms from window start) and when the gauge is cleared by a reload."""

    key: np.ndarray  # gpu << 42 | ms, sorted
    code: np.ndarray


@dataclass(slots=True)
class EnergyState:
    """The energy counter of each GPU (J) at the start of the next day to simulate."""

    joules: np.ndarray


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index of the last key <= each key, or -1 (also when there are no keys at all)."""
    if sorted_keys.size == 0:
        return np.full(keys.shape, -1, dtype=np.int64)
    return np.searchsorted(sorted_keys, keys, side="right") - 1


def _dict_strings(index: np.ndarray, values: list[str], null: np.ndarray | None = None) -> pa.Array:
    idx = pa.array(index.astype(np.int32), mask=null)
    return pa.DictionaryArray.from_arrays(idx, pa.array(values, pa.string())).cast(pa.string())


def _f32(x: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    return pa.array(x.astype(np.float32), type=pa.float32(), mask=null)


def _corrected_errors(health: Health, gpus: np.ndarray, t_s: np.ndarray) -> np.ndarray:
    """The volatile corrected-ECC counter of `gpus` at `t_s` (hard setting): a healthy GPU's
    count and creep, plus every step of `health.sbe_steps` so far, counted from the last
    driver reload (which resets the counter to 0)."""
    sbe = np.zeros(t_s.shape, dtype=np.int64)
    steps: dict[int, list[tuple[float, int]]] = {}
    for g, when, n in health.sbe_steps:
        steps.setdefault(g, []).append((when, n))
    for row, g in enumerate(int(x) for x in gpus):
        t = t_s[row]
        reloads = np.array(health.driver_reloads.get(g, ()), dtype=np.float64)
        last = reloads[np.searchsorted(reloads, t, side="right") - 1] if reloads.size else None
        since = t if last is None else np.where(t >= reloads[0], t - last, t)
        count = np.zeros(t.shape)
        if g in health.benign_sbe:
            base, creep = health.benign_sbe[g]
            start = base if last is None else np.where(t >= reloads[0], 0.0, base)
            count = np.floor(start + creep * since / DAY_S)
        if g in steps:
            times = np.array([a for a, _ in steps[g]])
            cum = np.r_[0, np.cumsum([n for _, n in steps[g]])]
            count = count + cum[np.searchsorted(times, t, side="right")]
            if last is not None:
                from_reload = np.where(t >= reloads[0], last, -np.inf)
                count = count - cum[np.searchsorted(times, from_reload, side="right")]
        sbe[row] = count.astype(np.int64)
    return sbe


def make_samples(
    *,
    fleet: Fleet,
    jobs: list[Job],
    allocs: Allocations,
    health: Health,
    xids: XidTimeline,
    energy: EnergyState,
    gpus: np.ndarray,
    day: int,
    t0_ms: int,
    interval_s: int,
    horizon_s: float,
    rng: np.random.Generator,
) -> pa.Table:
    """Return the `gpu_samples` rows of `gpus` for simulated day `day` (advances `energy`)."""
    n_g = gpus.size
    per_day = int(DAY_S // interval_s)
    node = fleet.node_of[gpus]
    # each node's exporter is scraped at its own offset within the interval, with jitter
    phase = (np.abs(np.sin(node * 12.9898 + 78.233)) * interval_s)[:, None]
    grid_s = day * DAY_S + np.arange(per_day)[None, :] * float(interval_s) + phase
    hard = health.hard  # noisier telemetry and subtler failures
    jitter = np.clip(rng.normal(0, 1, size=(n_g, per_day)), -4, 4) * (2.0 if hard else 0.25)
    t_s = np.maximum(grid_s + np.clip(jitter, -8, 8), 0.0)
    t_ms = np.round(t_s * 1000).astype(np.int64)

    valid = rng.random((n_g, per_day)) >= (0.02 if hard else 0.003)  # scrapes that were lost
    valid &= t_s < horizon_s
    for gap in health.gaps:
        valid &= ~((node[:, None] == gap.node) & (t_s >= gap.start_s) & (t_s < gap.end_s))
    for f in health.failures:
        offline_from = f.fail_s + (0 if f.xid == 79 else 900)  # XID 79: the GPU fell off the bus
        valid &= ~((gpus[:, None] == f.gpu) & (t_s >= offline_from) & (t_s < f.repair_s))

    # --- which job owns each sample (the same rule as DESIGN §4: start <= ts < end) ---
    keys = (gpus[:, None].astype(np.int64) << 42) | np.maximum(t_ms, 0)
    a = _lookup(allocs.key, keys)
    if allocs.key.size:
        a_safe = np.maximum(a, 0)
        owned = (a >= 0) & (allocs.gpu[a_safe] == gpus[:, None]) & (t_ms < allocs.end_ms[a_safe])
        owned &= t_ms >= allocs.start_ms[a_safe]
        start_ms = np.where(owned, allocs.start_ms[a_safe], 0)
        rank = np.where(owned, allocs.rank[a_safe], -1)
        job_idx = np.where(owned, allocs.job[a_safe], -1)
    else:
        owned = np.zeros(keys.shape, dtype=bool)
        start_ms = np.zeros(keys.shape, dtype=np.int64)
        rank = np.full(keys.shape, -1, dtype=np.int64)
        job_idx = np.full(keys.shape, -1, dtype=np.int64)
    codes = np.array([j.archetype.code for j in jobs] + [-1], dtype=np.int8)
    code = codes[job_idx]
    level = np.array([j.level for j in jobs] + [0.5])[job_idx]
    since_s = (t_ms - start_ms) / 1000.0
    n_gpus_job = np.array([j.gpus for j in jobs] + [0])[job_idx]

    shape = (n_g, per_day)
    u = rng.random(shape)
    noise = rng.normal(0, 1, size=shape)
    sm = np.zeros(shape)
    util = np.zeros(shape)
    tensor_ratio = np.full(shape, 0.5)
    dram = np.zeros(shape)
    fb_frac = np.zeros(shape)
    nvlink = np.zeros(shape)
    pcie = rng.uniform(2e6, 2e7, size=shape)

    noise_sd = 0.12 if hard else 0.05

    def train(m: np.ndarray, base: float, spread: float, fb_lo: float, fb_hi: float) -> None:
        sm[m] = np.clip(base + spread * level[m] + noise_sd * noise[m], 0.05, 0.97)
        util[m] = np.clip(96 + 4 * u[m], 0, 100)
        dram[m] = np.clip(0.2 + 0.3 * sm[m] + 0.03 * noise[m], 0, 1)
        fb_frac[m] = fb_lo + (fb_hi - fb_lo) * level[m]
        pcie[m] = 2e8 + 8e8 * u[m]

    c = CODE_OF
    pretrain = code == c["pretrain"]
    train(pretrain, 0.6, 0.22, 0.86, 0.95)
    tensor_ratio[pretrain] = 0.72
    nvlink[pretrain] = 4e10 + 8e10 * sm[pretrain]
    stragglers = np.array([j.straggler for j in jobs] + [-1])[job_idx]
    slow = pretrain & (stragglers >= 0)
    sm[slow & (rank == stragglers)] *= 0.45
    sm[slow & (rank != stragglers)] *= 0.85
    checkpoint = pretrain & ((since_s % 3600.0) < 90)
    sm[checkpoint] = 0.0
    util[checkpoint] = 0.0

    fine = (code == c["finetune"]) | (code == c["debug"])
    train(fine, 0.35, 0.3, 0.4, 0.85)
    tensor_ratio[fine] = 0.55
    nvlink[fine & (n_gpus_job > 1)] = 5e9 + 2.5e10 * u[fine & (n_gpus_job > 1)]

    inp = code == c["input_bound"]
    burst = inp & (u < 0.3)
    frac = np.where(burst, 0.5 + 0.5 * rng.random(shape), 0.04 * rng.random(shape))
    util[inp] = 100 * frac[inp]
    sm[inp] = frac[inp] * (0.5 + 0.2 * level[inp])
    dram[inp] = sm[inp] * 0.5
    fb_frac[inp] = 0.3 + 0.3 * level[inp]
    pcie[inp] = 1e9 + 5e9 * u[inp]

    inf = code == c["inference"]
    hour = (t_s % DAY_S) / 3600.0
    load = 0.1 + 0.45 * np.clip(np.sin(np.pi * (hour - 7) / 14), 0, None) + 0.04 * noise
    load = np.clip(load, 0.02, 0.9)
    util[inf] = np.clip(load[inf] * 220, 0, 100)
    sm[inf] = load[inf] * 0.6
    tensor_ratio[inf] = 0.4
    dram[inf] = sm[inf] * 0.8
    fb_frac[inf] = 0.6 + 0.2 * level[inf]
    pcie[inf] = 2e8 + 6e8 * u[inf]
    phase_s = np.array([j.poll_phase_s for j in jobs] + [0.0])[job_idx]
    if hard:  # a bursty service: busy, then resting (model kept in memory) for rest_frac
        period = np.array([j.burst_period_s for j in jobs] + [0.0])[job_idx]
        rest_frac = np.array([j.rest_frac for j in jobs] + [0.0])[job_idx]
        cycle = np.mod(since_s + phase_s, np.maximum(period, 1.0)) / np.maximum(period, 1.0)
        resting = inf & (period > 0) & (cycle < rest_frac)
        util[resting] = 0.0
        sm[resting] = 0.0
        dram[resting] = 0.0
        busy_phase = inf & (period > 0) & ~resting  # the requests queued while it rested
        util[busy_phase] = np.maximum(util[busy_phase], 60 + 40 * u[busy_phase])
        sm[busy_phase] = np.maximum(sm[busy_phase], 0.25 + 0.3 * level[busy_phase])

    nb = code == c["notebook"]
    nb_burst = nb & (u < 0.07)
    sm[nb_burst] = 0.2 + 0.6 * rng.random(int(nb_burst.sum()))
    util[nb_burst] = 40 + 60 * rng.random(int(nb_burst.sum()))
    tensor_ratio[nb] = 0.4
    fb_frac[nb] = 0.15 + 0.35 * level[nb]

    idle = code == c["idle"]
    fb_frac[idle] = np.where(level[idle] < 0.5, 0.006, 0.0)
    if hard:  # a monitoring probe or a stray kernel now and then
        blip = idle & (u > 0.997)
        util[blip] = np.clip(5 + 25 * noise[blip] ** 2, 5, 40)
        sm[blip] = 0.01 + 0.02 * np.abs(noise[blip])

    partial = code == c["partial"]
    active_k = np.array([j.active_k for j in jobs] + [0])[job_idx]
    working = partial & (rank < active_k)
    train(working, 0.4, 0.3, 0.5, 0.85)
    idle_fb = np.array([j.idle_fb_frac for j in jobs] + [0.006])[job_idx]
    fb_frac[partial & ~working] = idle_fb[partial & ~working]

    hung = code == c["hung"]
    hang_ms = np.array([(j.hang_s or 0.0) * 1000 for j in jobs] + [0.0])[job_idx]
    train(hung, 0.55, 0.2, 0.7, 0.9)
    nvlink[hung] = 2e10 + 4e10 * sm[hung]
    hung_now = hung & ((t_ms - start_ms) >= hang_ms)
    sm[hung_now] = (0.02 if hard else 0.004) * u[hung_now]
    util[hung_now] = 100.0
    dram[hung_now] = 0.0
    nvlink[hung_now] = 0.0

    hold = code == c["memory_hold"]
    fb_frac[hold] = 0.7 + 0.25 * level[hold]

    # hard setting: a health check, monitoring agent or notebook poll runs a small kernel
    # every ~20 minutes on otherwise idle GPUs: GPU_UTIL high for 30-60 s, few SMs busy
    poll_period = np.array([j.poll_period_s for j in jobs] + [0.0])[job_idx]
    poll_len = np.array([j.poll_len_s for j in jobs] + [0.0])[job_idx]
    polled = (poll_period > 0) & (
        np.mod(since_s + phase_s, np.maximum(poll_period, 1.0)) < poll_len
    )
    util[polled] = 60 + 40 * u[polled]
    sm[polled] = 0.02 + 0.06 * u[polled]

    small = code == c["overallocated"]
    sm[small] = 0.04 + 0.11 * u[small]
    util[small] = 15 + 30 * u[small]
    fb_frac[small] = 0.04 + 0.06 * level[small]
    tensor_ratio[small] = 0.3

    # every training-like job spends its first minutes loading data and building the model
    startup = np.isin(code, [c["pretrain"], c["finetune"], c["debug"], c["input_bound"], c["hung"]])
    startup &= since_s < 60 + 240 * level
    sm[startup] = 0.0
    util[startup] = 0.0

    tensor = sm * tensor_ratio
    engine = np.clip(sm * 1.08 + 0.01 * (util > 0), 0, 1)
    engine[hung_now] = sm[hung_now]

    # --- device-level fields from the activity ---
    model_of_node = fleet.model_of
    limit = np.array([m.power_limit_w for m in model_of_node])[node][:, None]
    idle_w = np.array([m.idle_power_w for m in model_of_node])[node][:, None]
    fb_total = np.array([m.fb_total_mib for m in model_of_node])[node][:, None]
    clock_max = np.array([m.sm_clock_max_mhz for m in model_of_node])[node][:, None]
    clock_idle = np.array([m.sm_clock_idle_mhz for m in model_of_node])[node][:, None]
    mem_clock = np.array([m.mem_clock_mhz for m in model_of_node])[node][:, None]
    hbm = np.array([m.hbm for m in model_of_node])[node]

    busy = util > 0
    power = idle_w + (limit - idle_w) * (0.08 * busy + 0.8 * sm**0.9 + 0.1 * dram)
    power = np.where(hung_now, idle_w + 40, power) + 3 * noise
    hot = np.zeros(shape, dtype=bool)
    for span in health.thermal:
        hot |= (node[:, None] == span.node) & (t_s >= span.start_s) & (t_s < span.end_s)
    power = np.where(hot, power * 0.85, power)
    power = np.clip(power, idle_w * 0.9, limit)
    temp_sd = 3.5 if hard else 1.5
    temp = 28 + 52 * (power - idle_w) / (limit - idle_w) + temp_sd * noise + np.where(hot, 16, 0)
    clock = np.where(busy, clock_max * (0.97 + 0.03 * u), clock_idle)
    capped = power > 0.97 * limit
    clock = np.where(capped, clock * 0.92, clock)
    clock = np.where(hot & busy, clock * 0.7, clock)
    reasons = np.where(busy, 0, CLOCK_IDLE) | np.where(capped, CLOCK_SW_POWER_CAP, 0)
    # thermal slowdown needs heat: an idle GPU on a hot node stays far below its slowdown
    # temperature, so only busy ones throttle (as their clocks above)
    reasons = reasons | np.where(hot & busy, CLOCK_SW_THERMAL | CLOCK_HW_THERMAL, 0)
    fb_used = np.minimum(
        fb_frac * fb_total + np.where(fb_frac > 0, 0, 1.0), fb_total - MIB_RESERVED
    )

    # --- the energy counter keeps counting through gaps; resets on a driver reload ---
    joules = energy.joules[gpus][:, None] + np.cumsum(power * interval_s, axis=1)
    for row, g in enumerate(gpus):
        for reset_s in health.energy_resets.get(int(g), ()):
            if day * DAY_S <= reset_s < (day + 1) * DAY_S:
                after = t_s[row] >= reset_s
                if after.any():
                    first = int(np.argmax(after))
                    before = joules[row, first - 1] if first else energy.joules[g]
                    joules[row, after] -= before
    energy.joules[gpus] = joules[:, -1]

    # --- health counters ---
    sbe = np.zeros(shape, dtype=np.int64)
    dbe = np.zeros(shape, dtype=np.int64)
    pending = np.zeros(shape, dtype=bool)
    remap_fail = np.zeros(shape, dtype=bool)
    if hard:
        sbe = _corrected_errors(health, gpus, t_s)
    for f in health.failures:
        row_mask = (gpus == f.gpu)[:, None]
        degrading = row_mask & (t_s >= f.degrade_s) & (t_s < f.repair_s)
        x = np.clip((t_s - f.degrade_s) / max(f.fail_s - f.degrade_s, 1.0), 0, 1)
        if not hard:  # (hard: its climb is in health.sbe_steps)
            rise = np.floor(2 * np.exp(6.5 * x))
            sbe = np.where(degrading, rise.astype(np.int64), sbe)
        if hard and f.xid == 79:
            temp = np.where(degrading & (t_s < f.fail_s), temp + 6 * x, temp)
        failed = row_mask & (t_s >= f.fail_s) & (t_s < f.repair_s)
        if f.xid == 48:
            dbe = np.where(failed, 1, dbe)
        if f.remap_failure:
            pending_s = (1.5 if hard else 6.0) * 3600
            pending |= row_mask & (t_s >= f.fail_s - pending_s) & (t_s < f.repair_s)
            remap_fail |= failed
    xid_last = np.zeros(shape, dtype=np.int32)
    if xids.key.size:
        x_idx = _lookup(xids.key, keys)
        x_safe = np.maximum(x_idx, 0)
        has_xid = (x_idx >= 0) & ((xids.key[x_safe] >> 42) == gpus[:, None])
        xid_last = np.where(has_xid, xids.code[x_safe], 0).astype(np.int32)

    # --- flatten the valid samples into Arrow ---
    flat = valid.ravel()
    gg = np.broadcast_to(gpus[:, None], shape).ravel()[flat]

    def col(x: np.ndarray) -> np.ndarray:
        return np.asarray(x).ravel()[flat]

    profiling_off = np.isin(node, list(health.no_profiling))
    prof_null = np.broadcast_to(profiling_off[:, None], shape).ravel()[flat]
    mem_temp_null = np.broadcast_to(~hbm[:, None], shape).ravel()[flat]
    jobs_str = [str(j.job_id) for j in jobs]
    job_col = col(job_idx)
    node_names = list(fleet.nodes)
    n = int(flat.sum())
    return pa.table(
        {
            "ts": pa.array(col(t_ms) + t0_ms, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "cluster": pa.repeat(pa.scalar(fleet.cluster), n),
            "node": _dict_strings(fleet.node_of[gg], node_names),
            "gpu_index": pa.array(fleet.index_of[gg], pa.int16()),
            "gpu_uuid": _dict_strings(gg, list(fleet.uuids)),
            "model": _dict_strings(fleet.node_of[gg], [m.name for m in fleet.model_of]),
            "interval_s": pa.repeat(pa.scalar(float(interval_s), pa.float32()), n),
            "job_id": _dict_strings(np.maximum(job_col, 0), jobs_str, job_col < 0),
            "gpu_util_pct": _f32(np.round(col(util))),
            "engine_active": _f32(col(engine), prof_null),
            "sm_active": _f32(col(sm), prof_null),
            "sm_occupancy": _f32(col(sm * (0.3 + 0.2 * level)), prof_null),
            "tensor_active": _f32(col(tensor), prof_null),
            "dram_active": _f32(col(dram), prof_null),
            "fb_used_mib": _f32(np.round(col(fb_used))),
            "fb_free_mib": _f32(np.round(col(fb_total - MIB_RESERVED - fb_used))),
            "power_w": _f32(col(power)),
            "energy_j": pa.array(col(joules), pa.float64()),
            "temp_c": _f32(np.round(col(temp))),
            "mem_temp_c": _f32(np.round(col(temp + 6)), mem_temp_null),
            "sm_clock_mhz": _f32(np.round(col(clock))),
            "mem_clock_mhz": _f32(col(np.broadcast_to(mem_clock, shape))),
            "clock_event_reasons": pa.array(col(reasons), pa.int64()),
            "pcie_tx_bps": pa.array(col(pcie * 0.3), pa.float64(), mask=prof_null),
            "pcie_rx_bps": pa.array(col(pcie), pa.float64(), mask=prof_null),
            "nvlink_tx_bps": pa.array(col(nvlink / 2), pa.float64(), mask=prof_null),
            "nvlink_rx_bps": pa.array(col(nvlink / 2), pa.float64(), mask=prof_null),
            "xid_last": pa.array(col(xid_last), pa.int32()),
            "ecc_sbe_volatile": pa.array(col(sbe), pa.int64()),
            "ecc_dbe_volatile": pa.array(col(dbe), pa.int64()),
            "remap_pending": pa.array(col(pending), pa.bool_()),
            "remap_failure": pa.array(col(remap_fail), pa.bool_()),
            "hpc_job": _dict_strings(np.maximum(job_col, 0), jobs_str, job_col < 0),
            "source": pa.repeat(pa.scalar("sim"), n),
        }
    )
