"""The NVML node agent through a fake NVML and a fake /proc: rows field by field, units, MIG,
unsupported fields, XIDs, a GPU vanishing, job_gpus intervals across ticks and runs."""

from __future__ import annotations

import datetime as dt
import errno
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from collector.errors import ConfigError
from collector.sources.nvml.agent import AgentConfig, NvmlAgent, SpoolNotWritable, run_agent
from collector.sources.nvml.device import NvmlUnavailable
from collector.sources.spool import Spool
from tests.nvml.fake_nvml import GIB, NOT_SUPPORTED, FakeGpu, FakeMig, FakeNvml
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import connect
from warehouse.lake import Lake

MIB = 1 << 20
UUID0 = "GPU-0f1e2d3c-0000-4000-8000-000000000000"
UUID1 = "GPU-1f1e2d3c-0000-4000-8000-000000000001"
UUID2 = "GPU-2f1e2d3c-0000-4000-8000-000000000002"
POD = "8f3d2a1c-5b6e-4f7a-9c0d-1e2f3a4b5c6d"
SLURM_V1 = "12:memory:/slurm/uid_2101171/job_280678/step_0/task_0\n0::/system.slice/slurmd.service"
SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0"
POD_V2 = (
    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
    + POD.replace("-", "_")
    + ".slice/cri-containerd-"
    + "ab" * 32
    + ".scope"
)


def make_gpus() -> list[FakeGpu]:
    """An H200 running a Slurm job, an older board missing some fields, a MIG-split H200."""
    return [
        FakeGpu(UUID0, processes=[(1001, 30 * GIB)]),
        FakeGpu(
            UUID1,
            name="NVIDIA L40S",
            total=48 * GIB,
            used=0,
            unsupported={
                "nvmlDeviceGetPowerUsage",
                "nvmlDeviceGetTotalEnergyConsumption",
                "nvmlDeviceGetRemappedRows",
                "memory_temp",
            },
        ),
        FakeGpu(
            UUID2,
            mig=[
                FakeMig(1, "3g.71gb", total=71 * GIB, used=20 * GIB, processes=[(2001, 19 * GIB)]),
                FakeMig(2, "1g.18gb", total=18 * GIB, used=0),
            ],
        ),
    ]


@pytest.fixture
def node(tmp_path, proc, clock):
    """A node: fake NVML with make_gpus(), fake /proc with the two owners, spool, lake."""
    proc.add(1001, SLURM_V1)
    proc.add(2001, POD_V2)

    class Node:
        nvml = FakeNvml(make_gpus())
        spool = tmp_path / "spool"
        lake = tmp_path / "lake"
        config = AgentConfig("della", "g001", tmp_path / "spool", Lake.at(tmp_path / "lake"), 30.0)

        pod_logs = tmp_path / "pods"  # the kubelet's pod log folders: none here yet

        def agent(self, **kwargs: Any) -> NvmlAgent:
            kwargs.setdefault("pod_logs", self.pod_logs)
            return NvmlAgent(
                self.config, nvml=self.nvml, proc_root=proc.root, clock=clock, **kwargs
            )

    return Node()


def rows_by_slot(table: pa.Table) -> dict[tuple[str, int | None], dict[str, Any]]:
    return {(r["gpu_uuid"], r["mig_instance"]): r for r in table.to_pylist()}


def test_one_tick_lands_one_row_per_gpu_and_mig_instance_with_units_converted(node, read_lake, t0):
    with node.agent() as agent:
        tick = agent.tick()

    samples = rows_by_slot(read_lake(node.lake, "gpu_samples"))
    assert sorted(samples) == [(UUID0, None), (UUID1, None), (UUID2, 1), (UUID2, 2)]
    h200 = samples[(UUID0, None)]
    assert h200 == {
        "ts": t0,
        "cluster": "della",
        "node": "g001",
        "gpu_index": 0,
        "gpu_uuid": UUID0,
        "mig_profile": None,
        "mig_instance": None,
        "model": "NVIDIA H200",
        "interval_s": 30.0,
        "job_id": "280678",
        "gpu_util_pct": 87.0,
        "engine_active": None,
        "sm_active": None,
        "sm_occupancy": None,
        "tensor_active": None,
        "dram_active": None,
        "fb_used_mib": 40 * 1024.0,  # bytes → MiB, reserved memory not counted as used
        "fb_free_mib": 141 * 1024.0 - 40 * 1024.0 - 512.0,
        "power_w": pytest.approx(412.345, rel=1e-6),  # mW → W
        "energy_j": 987_654.321,  # mJ → J
        "temp_c": 54.0,
        "mem_temp_c": 61.0,
        "sm_clock_mhz": 1980.0,
        "mem_clock_mhz": 3201.0,
        "clock_event_reasons": 0x4,
        "pcie_tx_bps": None,
        "pcie_rx_bps": None,
        "nvlink_tx_bps": None,
        "nvlink_rx_bps": None,
        "xid_last": 0,  # watched, none seen
        "ecc_sbe_volatile": 3,
        "ecc_dbe_volatile": 0,
        "remap_pending": False,
        "remap_failure": False,
        "k8s_namespace": None,
        "k8s_pod": None,
        "k8s_container": None,
        "hpc_job": None,
        "source": "nvml",
    }
    assert tick.gpus == 3 and tick.samples == 4


def test_unsupported_fields_are_null_and_counted_never_zero(node, read_lake):
    with node.agent() as agent:
        tick = agent.tick()

    l40s = rows_by_slot(read_lake(node.lake, "gpu_samples"))[(UUID1, None)]
    assert (l40s["power_w"], l40s["energy_j"], l40s["mem_temp_c"]) == (None, None, None)
    assert (l40s["remap_pending"], l40s["remap_failure"]) == (None, None)
    assert (l40s["model"], l40s["fb_used_mib"], l40s["fb_free_mib"]) == (
        "NVIDIA L40S",
        0.0,
        48 * 1024.0 - 512.0,
    )
    assert tick.counts["power_w: NOT_SUPPORTED"] == 1
    assert tick.counts["energy_j: NOT_SUPPORTED"] == 1
    assert tick.counts["remap_pending: NOT_SUPPORTED"] == 1
    assert tick.counts["mem_temp_c: NOT_SUPPORTED"] == 1


def test_mig_instances_repeat_device_fields_and_carry_their_own_memory_and_owner(node, read_lake):
    with node.agent() as agent:
        agent.tick()

    samples = rows_by_slot(read_lake(node.lake, "gpu_samples"))
    big, small = samples[(UUID2, 1)], samples[(UUID2, 2)]
    assert (big["mig_profile"], big["fb_used_mib"], big["fb_free_mib"]) == (
        "3g.71gb",
        20 * 1024.0,
        51 * 1024.0,
    )
    assert (small["mig_profile"], small["fb_used_mib"], small["job_id"]) == ("1g.18gb", 0.0, None)
    assert big["job_id"] == POD
    assert big["gpu_util_pct"] is None  # NVML has no utilisation for MIG
    for column in ("power_w", "energy_j", "temp_c", "sm_clock_mhz", "ecc_sbe_volatile"):
        assert big[column] == small[column] is not None


def test_pids_map_to_job_gpus_intervals_with_mapping_nvml_cgroup(node, read_lake, t0):
    with node.agent() as agent:
        agent.tick()

    job_gpus = sorted(read_lake(node.lake, "job_gpus").to_pylist(), key=lambda r: r["job_id"])
    end = t0 + dt.timedelta(seconds=30)
    assert job_gpus == [
        {
            "cluster": "della",
            "job_id": "280678",
            "node": "g001",
            "gpu_index": 0,
            "gpu_uuid": UUID0,
            "mig_instance": None,
            "start_ts": t0,
            "end_ts": end,
            "mapping": "nvml-cgroup",
        },
        {
            "cluster": "della",
            "job_id": POD,
            "node": "g001",
            "gpu_index": 2,
            "gpu_uuid": UUID2,
            "mig_instance": 1,
            "start_ts": t0,
            "end_ts": end,
            "mapping": "nvml-cgroup",
        },
    ]


def test_a_pods_job_is_namespace_slash_pod_where_its_log_folder_names_it(node, read_lake, clock):
    # keyed by its UID, a pod's GPU time met no job the Kubernetes collector landed (it keys
    # pods by <namespace>/<pod>): no user, no account, 0 observed GPU-hours on the pod's job
    with node.agent() as agent:
        first = agent.tick()  # no folder names the pod yet: its UID, counted
        (node.pod_logs / f"team-a_train-0.v2_{POD}").mkdir(parents=True)
        (node.pod_logs / "kube-system_coredns-5d78c9869d-abcde").mkdir()  # no UID: not a pod's
        clock.advance(30)
        second = agent.tick()

    assert first.counts["pid: pod_unnamed"] == 1 and "pid: pod_unnamed" not in second.counts
    mig = [r for r in read_lake(node.lake, "gpu_samples").to_pylist() if r["mig_instance"] == 1]
    assert [r["job_id"] for r in sorted(mig, key=lambda r: r["ts"])] == [POD, "team-a/train-0.v2"]
    jobs = {r["job_id"] for r in read_lake(node.lake, "job_gpus").to_pylist()}
    assert jobs == {"280678", POD, "team-a/train-0.v2"}


def test_a_clock_stepped_back_starts_a_new_interval_so_every_sample_has_one(
    node, read_lake, clock, t0
):
    # an NTP step back of an hour: the job's interval stayed [t0, t0 + 90 s) and the samples
    # stamped after the step fell outside every interval of the job
    with node.agent() as agent:
        for _ in range(3):
            agent.tick()
            clock.advance(30)
        clock.advance(-3600)
        for _ in range(3):
            agent.tick()
            clock.advance(30)

    runs = [r for r in read_lake(node.lake, "job_gpus").to_pylist() if r["job_id"] == "280678"]
    spans = sorted((r["start_ts"], r["end_ts"]) for r in runs)
    back = t0 - dt.timedelta(seconds=3510)
    assert spans == [
        (back, back + dt.timedelta(seconds=90)),
        (t0, t0 + dt.timedelta(seconds=90)),
    ]
    samples = [
        r["ts"] for r in read_lake(node.lake, "gpu_samples").to_pylist() if r["gpu_uuid"] == UUID0
    ]
    assert len(samples) == 6
    assert all(any(start <= ts < end for start, end in spans) for ts in samples)


def test_an_interval_grows_each_tick_and_a_new_one_starts_after_the_job_left(
    node, read_lake, clock, t0
):
    gpu0 = node.nvml.gpus[0]
    with node.agent() as agent:
        for _ in range(3):  # seen at t0, +30, +60
            agent.tick()
            clock.advance(30)
        gpu0.processes = []  # +90: gone
        agent.tick()
        clock.advance(30)
        gpu0.processes = [(1001, GIB)]  # +120: back
        agent.tick()

    runs = sorted(
        (r["start_ts"], r["end_ts"])
        for r in read_lake(node.lake, "job_gpus").to_pylist()
        if r["job_id"] == "280678"
    )
    s = dt.timedelta(seconds=1)
    assert runs == [(t0, t0 + 90 * s), (t0 + 120 * s, t0 + 150 * s)]


def test_a_process_list_that_fails_once_does_not_split_the_run(node, read_lake, clock, t0):
    gpu0 = node.nvml.gpus[0]
    with node.agent() as agent:
        agent.tick()
        clock.advance(30)
        gpu0.unsupported.add("nvmlDeviceGetComputeRunningProcesses")
        failed = agent.tick()
        clock.advance(30)
        gpu0.unsupported.clear()
        agent.tick()

    assert failed.counts["processes: NOT_SUPPORTED"] == 1
    runs = [r for r in read_lake(node.lake, "job_gpus").to_pylist() if r["job_id"] == "280678"]
    assert [(r["start_ts"], r["end_ts"]) for r in runs] == [(t0, t0 + dt.timedelta(seconds=90))]


def test_a_shared_gpu_has_one_row_and_one_interval_per_job(node, proc, read_lake, clock):
    # MPS / time-slicing: processes of two jobs on GPU 0 at once; job 555 leaves after 2 ticks
    proc.add(1002, SLURM_V2.format(job=555))
    node.nvml.gpus[0].processes.append((1002, GIB))

    with node.agent() as agent:
        ticks = [agent.tick()]
        clock.advance(30)
        ticks.append(agent.tick())
        node.nvml.gpus[0].processes.pop()
        clock.advance(30)
        ticks.append(agent.tick())

    assert [t.samples for t in ticks] == [5, 5, 4]  # 4 GPUs or MIG instances, GPU 0 twice
    on_gpu0 = [r for r in read_lake(node.lake, "gpu_samples").to_pylist() if r["gpu_uuid"] == UUID0]
    assert sorted((r["ts"], r["job_id"]) for r in on_gpu0) == sorted(
        [(ticks[0].ts, "280678"), (ticks[0].ts, "555"), (ticks[1].ts, "280678")]
        + [(ticks[1].ts, "555"), (ticks[2].ts, "280678")]
    )
    for tick in ticks[:2]:  # the same device values on both jobs' rows
        shared = [r for r in on_gpu0 if r["ts"] == tick.ts]
        assert len({(r["power_w"], r["energy_j"], r["fb_used_mib"]) for r in shared}) == 1
    jobs = {
        r["job_id"] for r in read_lake(node.lake, "job_gpus").to_pylist() if r["gpu_uuid"] == UUID0
    }
    assert jobs == {"280678", "555"}

    con = connect(node.lake)
    build_marts(con, node.lake, AttributionConfig())
    usage = {
        job: (observed, shared)
        for job, observed, shared in con.sql(
            "SELECT job_id, observed_gpu_h * 3600, shared FROM job_usage"
        ).fetchall()
    }
    # GPU 0: three 30 s ticks, the first two split between the jobs
    assert usage["280678"] == (pytest.approx(15 + 15 + 30), True)
    assert usage["555"] == (pytest.approx(15 + 15), True)


def test_a_process_gone_from_proc_is_skipped_and_counted(node, read_lake):
    node.nvml.gpus[1].processes = [(9999, GIB)]  # listed by NVML, exited before /proc was read

    with node.agent() as agent:
        tick = agent.tick()

    assert tick.counts["pid: process_gone"] == 1
    assert rows_by_slot(read_lake(node.lake, "gpu_samples"))[(UUID1, None)]["job_id"] is None
    assert {r["gpu_uuid"] for r in read_lake(node.lake, "job_gpus").to_pylist()} == {UUID0, UUID2}


def test_an_xid_lands_as_an_event_and_stays_as_xid_last(node, read_lake, clock, t0):
    with node.agent() as agent:
        agent.tick()
        node.nvml.push_xid(node.nvml.gpus[0], 48)
        clock.advance(30)
        second = agent.tick()
        clock.advance(30)
        third = agent.tick()

    events = read_lake(node.lake, "gpu_events").to_pylist()
    xids = [e for e in events if e["kind"] == "xid"]
    assert xids == [
        {
            "cluster": "della",
            "node": "g001",
            "gpu_uuid": UUID0,
            "gpu_index": 0,
            "ts": t0 + dt.timedelta(seconds=30),
            "kind": "xid",
            "code": 48,
            "detail": "XID 48",
        }
    ]
    assert (second.events, third.events) == (1, 0)
    last = {
        (r["ts"], r["gpu_uuid"]): r["xid_last"]
        for r in read_lake(node.lake, "gpu_samples").to_pylist()
        if r["mig_instance"] is None
    }
    assert last[(t0, UUID0)] == 0
    assert last[(t0 + dt.timedelta(seconds=60), UUID0)] == 48  # sticky
    assert last[(t0 + dt.timedelta(seconds=60), UUID1)] == 0


def test_a_gpu_that_falls_off_the_bus_goes_offline_once_and_the_agent_carries_on(
    node, read_lake, clock, t0
):
    gpu0 = node.nvml.gpus[0]
    with node.agent() as agent:
        agent.tick()
        clock.advance(30)
        node.nvml.push_xid(gpu0, 79)
        gpu0.lost = True  # every later call on it answers NVML_ERROR_GPU_IS_LOST
        lost_tick = agent.tick()
        clock.advance(30)
        later = agent.tick()

    at = t0 + dt.timedelta(seconds=30)
    events = sorted(
        (e["kind"], e["code"], e["gpu_uuid"], e["ts"])
        for e in read_lake(node.lake, "gpu_events").to_pylist()
    )
    assert events == [("offline", 79, UUID0, at), ("xid", 79, UUID0, at)]
    assert lost_tick.offline == (UUID0,) and later.offline == ()
    assert (lost_tick.gpus, later.gpus) == (2, 2)
    samples = read_lake(node.lake, "gpu_samples").to_pylist()
    assert {r["gpu_uuid"] for r in samples if r["ts"] > t0} == {UUID1, UUID2}
    runs = [r for r in read_lake(node.lake, "job_gpus").to_pylist() if r["gpu_uuid"] == UUID0]
    assert [(r["start_ts"], r["end_ts"]) for r in runs] == [(t0, at)]  # closed when it fell off


def test_a_gpu_no_longer_listed_goes_offline(node, read_lake, clock):
    with node.agent() as agent:
        agent.tick()
        clock.advance(30)
        del node.nvml.gpus[1]
        tick = agent.tick()

    assert tick.offline == (UUID1,)
    offline = [e for e in read_lake(node.lake, "gpu_events").to_pylist() if e["kind"] == "offline"]
    assert [(e["code"], e["detail"]) for e in offline] == [
        (None, "GPU offline: no longer listed by NVML")
    ]


def test_health_conditions_land_once_per_onset(node, read_lake, clock):
    gpu0 = node.nvml.gpus[0]
    with node.agent() as agent:
        agent.tick()
        gpu0.dbe, gpu0.reasons, gpu0.remap = 2, 0x48, (1, 1, 1, 1)
        for _ in range(3):
            clock.advance(30)
            agent.tick()

    kinds = sorted((e["kind"], e["code"]) for e in read_lake(node.lake, "gpu_events").to_pylist())
    assert kinds == [
        ("ecc_dbe", 2),
        ("hw_slowdown", 0x48),
        ("row_remap_failure", None),
        ("thermal", 0x48),
    ]


class Killed(BaseException):
    """The agent's process killed (SIGKILL): nothing after the point it stopped at runs."""


class KilledAfterEvents(Spool):
    """A spool whose process is killed right after a tick spooled its events."""

    def put(self, table: str, batch: pa.Table, batch_id: str) -> Path | None:
        path = super().put(table, batch, batch_id)
        if table == "gpu_events":
            raise Killed
        return path


class FullDisk(Spool):
    """A spool on a disk with no space left."""

    def put(self, table: str, batch: pa.Table, batch_id: str) -> Path | None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.root / table))


def test_a_spool_that_cannot_be_written_is_one_clear_error(node, read_lake, clock):
    """A full spool disk: the agent stopped with a 40-line chained OSError traceback."""
    with node.agent() as agent:
        agent.tick()
    full = node.agent()
    full.__enter__()
    full.spool = FullDisk(node.spool)
    clock.advance(30)

    with pytest.raises(SpoolNotWritable) as raised:
        full.tick()

    assert str(raised.value) == (
        f"cannot write the spool {str(node.spool)!r}: No space left on device; free space "
        "there or give --spool another folder (what it holds lands at the next start)"
    )
    assert raised.value.__cause__ is None
    full.close()
    assert read_lake(node.lake, "gpu_samples").num_rows == 4  # the first tick's, once


def test_a_tick_killed_after_spooling_its_events_lands_each_onset_and_offline_gpu_once(
    node, read_lake, clock
):
    """Killed before it remembered them, the tick's conditions and offline GPU were spooled
    again as new at the next start: two onsets of one throttle, two offlines of one GPU."""
    killed = node.agent()
    killed.open()
    killed.tick()
    clock.advance(30)
    node.nvml.gpus[0].reasons = 0x48  # thermal and hardware slowdown, from now on
    del node.nvml.gpus[1]  # gone
    killed.spool = KilledAfterEvents(node.spool)
    with pytest.raises(Killed):
        killed.tick()  # (no close: its process is gone)

    for _ in range(2):
        clock.advance(30)
        with node.agent() as agent:
            agent.tick()

    events = sorted(
        (e["kind"], e["gpu_uuid"]) for e in read_lake(node.lake, "gpu_events").to_pylist()
    )
    assert events == [("hw_slowdown", UUID0), ("offline", UUID1), ("thermal", UUID0)]


def test_the_inventory_lists_each_physical_gpu(node, read_lake, t0):
    with node.agent() as agent:
        agent.tick()

    gpus = {r["gpu_uuid"]: r for r in read_lake(node.lake, "gpus").to_pylist()}
    assert gpus[UUID2] == {
        "cluster": "della",
        "node": "g001",
        "gpu_index": 2,
        "gpu_uuid": UUID2,
        "model": "NVIDIA H200",
        "mig_profile": "3g.71gb+1g.18gb",
        "fb_total_mib": 141 * 1024.0,
        "power_limit_w": 700.0,
        "first_seen": t0,
        "last_seen": t0,
    }
    assert gpus[UUID0]["mig_profile"] is None


def test_once_runs_from_cron_extend_the_same_interval(node, proc, clock, read_lake, t0):
    def once() -> None:
        run_agent(node.config, once=True, nvml=node.nvml, proc_root=proc.root, clock=clock)

    once()
    clock.advance(30)
    once()
    clock.advance(300)  # the agent was down for longer than 2 intervals: a new run
    once()

    runs = sorted(
        (r["start_ts"], r["end_ts"])
        for r in read_lake(node.lake, "job_gpus").to_pylist()
        if r["job_id"] == "280678"
    )
    s = dt.timedelta(seconds=1)
    assert runs == [(t0, t0 + 60 * s), (t0 + 330 * s, t0 + 360 * s)]
    assert node.nvml.shutdowns == 3


def test_a_tick_while_nvml_is_gone_is_counted_and_the_next_one_starts_nvml_again(
    node, read_lake, clock
):
    with node.agent() as agent:
        node.nvml.initialized = False  # the driver was reloaded under the agent
        gone = agent.tick()
        clock.advance(30)
        back = agent.tick()
        node.nvml.push_xid(node.nvml.gpus[0], 13)
        clock.advance(30)
        watched = agent.tick()

    assert gone.counts["nvml_unavailable"] == 1 and gone.samples == 0
    assert gone.offline == () and back.samples == 4
    assert read_lake(node.lake, "gpu_samples").num_rows == 8
    assert watched.events == 1  # XIDs are registered again on the new NVML session


def test_a_tick_while_nvml_is_gone_keeps_the_jobs_run_whole(node, read_lake, clock, t0):
    """A driver reload under the agent: the tick read nothing, and ended every job's run (the
    probe's [08:00:00, 08:00:30) and [08:01:00, 08:02:00) for one job running throughout)."""
    with node.agent() as agent:
        agent.tick()
        clock.advance(30)
        node.nvml.initialized = False
        agent.tick()
        for _ in range(2):
            clock.advance(30)
            agent.tick()

    runs = [r for r in read_lake(node.lake, "job_gpus").to_pylist() if r["job_id"] == "280678"]
    assert [(r["start_ts"], r["end_ts"]) for r in runs] == [(t0, t0 + dt.timedelta(seconds=120))]


def test_a_gpu_nvml_counts_but_does_not_name_once_is_not_offline(node, read_lake, clock, t0):
    """An error reading one GPU's UUID for one tick: it was said to be offline ("no longer
    listed by NVML") and its job's run was split."""
    gpu0 = node.nvml.gpus[0]
    with node.agent() as agent:
        agent.tick()
        clock.advance(30)
        gpu0.unsupported.add("nvmlDeviceGetUUID")
        unnamed = agent.tick()
        gpu0.unsupported.discard("nvmlDeviceGetUUID")
        clock.advance(30)
        agent.tick()

    assert unnamed.offline == ()
    assert [
        e for e in read_lake(node.lake, "gpu_events").to_pylist() if e["kind"] == "offline"
    ] == []
    runs = [r for r in read_lake(node.lake, "job_gpus").to_pylist() if r["job_id"] == "280678"]
    assert [(r["start_ts"], r["end_ts"]) for r in runs] == [(t0, t0 + dt.timedelta(seconds=90))]


def test_compute_instances_of_one_gpu_instance_are_one_instance_with_all_their_jobs(
    node, proc, read_lake
):
    """NVML lists one MIG device per compute instance: two compute instances of GPU instance 1
    made two identical rows, and the second's job took the first's place (job 400 vanished)."""
    proc.add(4001, SLURM_V2.format(job=400))
    proc.add(5001, SLURM_V2.format(job=500))
    node.nvml.gpus[2].mig = [
        FakeMig(1, "1c.3g.71gb", total=71 * GIB, used=20 * GIB, processes=[(4001, 9 * GIB)]),
        FakeMig(1, "2c.3g.71gb", total=71 * GIB, used=20 * GIB, processes=[(5001, 9 * GIB)]),
    ]
    with node.agent() as agent:
        agent.tick()

    samples = [r for r in read_lake(node.lake, "gpu_samples").to_pylist() if r["gpu_uuid"] == UUID2]
    # one row per sharer of the instance (the contract's shared GPU), not two copies of one
    assert sorted((r["mig_instance"], r["job_id"]) for r in samples) == [(1, "400"), (1, "500")]
    held = {(r["job_id"], r["mig_instance"]) for r in read_lake(node.lake, "job_gpus").to_pylist()}
    assert {("400", 1), ("500", 1)} <= held


def test_a_tick_that_cannot_tell_mig_instances_apart_keeps_their_runs(node, read_lake, clock, t0):
    """The GPU instance id unreadable for one tick: every instance fell into one slot, whose
    last process list replaced the others', and the pod's run on instance 1 was ended."""
    gpu2 = node.nvml.gpus[2]
    with node.agent() as agent:
        agent.tick()
        clock.advance(30)
        gpu2.unsupported.add("nvmlDeviceGetGpuInstanceId")
        agent.tick()
        gpu2.unsupported.discard("nvmlDeviceGetGpuInstanceId")
        clock.advance(30)
        agent.tick()

    runs = [r for r in read_lake(node.lake, "job_gpus").to_pylist() if r["gpu_uuid"] == UUID2]
    assert [(r["job_id"], r["mig_instance"], r["start_ts"], r["end_ts"]) for r in runs] == [
        (POD, 1, t0, t0 + dt.timedelta(seconds=90))
    ]
    samples = read_lake(node.lake, "gpu_samples").to_pylist()
    # the tick that told no instance apart still has the GPU's own row, its jobs unknown
    assert sorted(
        (r["ts"] - t0, r["mig_instance"], r["job_id"]) for r in samples if r["gpu_uuid"] == UUID2
    ) == [
        (dt.timedelta(0), 1, POD),
        (dt.timedelta(0), 2, None),
        (dt.timedelta(seconds=30), None, None),
        (dt.timedelta(seconds=60), 1, POD),
        (dt.timedelta(seconds=60), 2, None),
    ]


def test_run_agent_ticks_until_max_ticks(node, proc, clock):
    summary = run_agent(
        node.config.__class__("della", "g001", node.spool, Lake.at(node.lake), 0.05),
        nvml=node.nvml,
        proc_root=proc.root,
        clock=clock,
        max_ticks=2,
    )

    assert (summary.ticks, summary.samples, summary.pending) == (2, 8, 0)
    assert summary.counts["power_w: NOT_SUPPORTED"] == 2


@pytest.mark.parametrize(
    ("init_error", "message"),
    [
        (12, "libnvidia-ml.so.1 is not installed"),  # NVML_ERROR_LIBRARY_NOT_FOUND
        (9, "the NVIDIA kernel driver is not loaded"),  # NVML_ERROR_DRIVER_NOT_LOADED
        (NOT_SUPPORTED, "nvmlInit failed: NOT_SUPPORTED"),
    ],
)
def test_nvml_that_cannot_start_is_one_clear_error(node, init_error, message):
    node.nvml.init_error = init_error

    with pytest.raises(NvmlUnavailable, match=message):
        node.agent().open()


def test_a_node_without_gpus_is_one_clear_error(node):
    node.nvml.gpus = []

    with pytest.raises(NvmlUnavailable, match=r"no NVIDIA GPU found on 'g001'"):
        node.agent().open()
    assert node.nvml.shutdowns == 1


def test_bad_configuration_fails_before_nvml_is_touched(node, tmp_path):
    with pytest.raises(ConfigError, match="cluster name is empty"):
        NvmlAgent(AgentConfig(" ", "g001", tmp_path, Lake.at(tmp_path)), nvml=node.nvml)
    assert node.nvml.calls == []


def test_xid_last_is_null_where_xids_cannot_be_watched(node, read_lake):
    node.nvml.gpus[1].events_supported = False

    with node.agent() as agent:
        agent.tick()

    last = {r["gpu_uuid"]: r["xid_last"] for r in read_lake(node.lake, "gpu_samples").to_pylist()}
    assert last == {UUID0: 0, UUID1: None, UUID2: 0}


def test_an_xid_inside_a_mig_instance_names_the_instance(node, read_lake, clock):
    with node.agent() as agent:
        node.nvml.push_xid(node.nvml.gpus[2], 13)  # before registration: never seen
        agent.tick()
        node.nvml.push_xid(node.nvml.gpus[2], 31, gpu_instance=1)
        clock.advance(30)
        agent.tick()

    [event] = read_lake(node.lake, "gpu_events").to_pylist()
    assert (event["gpu_uuid"], event["gpu_index"], event["code"], event["detail"]) == (
        UUID2,
        2,
        31,
        "XID 31 on MIG instance 1",
    )
    last = {
        r["mig_instance"]: r["xid_last"]
        for r in read_lake(node.lake, "gpu_samples").to_pylist()
        if r["gpu_uuid"] == UUID2 and r["xid_last"]
    }
    assert last == {1: 31, 2: 31}  # a device-level field: repeated on every instance
