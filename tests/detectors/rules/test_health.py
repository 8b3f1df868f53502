"""Throttling, ECC, row remapping and XIDs on hand-made samples and events."""

from __future__ import annotations

import json

import pytest

from detectors.rules import RuleConfig, health
from detectors.rules.health import HealthThresholds
from detectors.rules.run import run_rules
from tests.detectors.rules.lake import CLUSTER, H100, at, connection, job
from warehouse import queries

NOW = at(86400)


def sample(t, **fields):
    row = {
        "ts": at(t),
        "cluster": CLUSTER,
        "node": "g001",
        "gpu_index": 0,
        "gpu_uuid": "GPU-a",
        "model": H100,
        "interval_s": 60.0,
        "gpu_util_pct": 100.0,
        "sm_clock_mhz": 1980.0,
        "clock_event_reasons": 0,
        "source": "test",
    }
    row.update(fields)
    return row


def run(tmp_path, samples=(), events=(), intervals=(), jobs=(), **thresholds):
    tables = {"gpu_samples": list(samples), "gpu_events": list(events)}
    if intervals:
        tables["job_gpus"] = list(intervals)
    if jobs:
        tables["jobs"] = list(jobs)
    con = connection(tmp_path, **tables)
    config = RuleConfig(health=HealthThresholds(**thresholds))
    return run_rules(con, config, NOW, rules=health.RULES).to_pylist()


def test_two_hours_of_hw_thermal_slowdown_at_70_percent_clock(tmp_path):
    # hour 0: normal at 1980 MHz; hours 1-2: 0x40 (HW thermal) at 1386 MHz = 70 %
    samples = [sample(m * 60) for m in range(60)]
    samples += [
        sample(m * 60, clock_event_reasons=0x40, sm_clock_mhz=1386.0, temp_c=91.0)
        for m in range(60, 180)
    ]
    [finding] = run(tmp_path, samples)
    assert finding["detector"] == "throttling"
    assert finding["subject_id"] == "GPU-a"
    assert finding["start_ts"] == at(3600) and finding["end_ts"] == at(3 * 3600)
    # 2 busy GPU-hours at 30 % clock loss
    assert finding["gpu_h_at_stake"] == pytest.approx(0.6)
    assert "thermal clock throttling for 2 h" in finding["message"]


def idle_thermal_bits(hours=3):
    """An idle GPU reporting SW+HW thermal clock-event bits at 48 °C for `hours` (never busy:
    its throttled busy clock is null)."""
    return [
        sample(
            m * 60,
            clock_event_reasons=0x1 | 0x20 | 0x40,
            gpu_util_pct=0.0,
            sm_clock_mhz=345.0,
            temp_c=48.0,
        )
        for m in range(hours * 60)
    ]


def test_thermal_bits_on_an_idle_cool_gpu_say_what_was_seen_not_check_cooling(tmp_path):
    [finding] = run(tmp_path, idle_thermal_bits())
    assert finding["detector"] == "throttling"
    message = finding["message"]
    assert message is not None
    assert "idle" in message and "48 °C" in message and "no work slowed" in message
    assert "thermal clock throttling" not in message  # no throttled work was seen
    assert "sensor" in message  # thermal bits without heat: the reading is the suspect
    assert finding["severity"] == "info"
    assert finding["gpu_h_at_stake"] == 0


def test_every_rule_gives_every_finding_a_message(tmp_path):
    # all rules over a lake with a null throttled clock (idle GPU with thermal bits), a busy
    # throttled GPU, counters and XIDs
    samples = idle_thermal_bits()
    samples += [
        sample(m * 60, gpu_index=1, gpu_uuid="GPU-b", clock_event_reasons=0x40, temp_c=91.0)
        for m in range(180)
    ]
    samples += [
        sample(m * 60, gpu_index=2, gpu_uuid="GPU-c", ecc_dbe_volatile=1) for m in range(60)
    ]
    con = connection(
        tmp_path,
        gpu_samples=samples,
        gpu_events=[
            {
                "cluster": CLUSTER,
                "node": "g001",
                "gpu_uuid": "GPU-a",
                "gpu_index": 0,
                "ts": at(7200),
                "kind": "xid",
                "code": 79,
            },
        ],
    )
    found = run_rules(con, RuleConfig(), NOW).to_pylist()
    assert {f["detector"] for f in found} >= {"throttling", "ecc_dbe", "xid_hardware"}
    assert [f for f in found if not f["message"]] == []


def test_the_power_cap_bit_alone_is_normal_at_full_load(tmp_path):
    samples = [sample(m * 60, clock_event_reasons=0x4) for m in range(180)]
    assert run(tmp_path, samples) == []


def test_a_throttled_minute_per_hour_is_below_the_quarter_hour_share(tmp_path):
    samples = [sample(m * 60, clock_event_reasons=0x40 if m % 60 == 0 else 0) for m in range(180)]
    assert run(tmp_path, samples) == []


def test_double_bit_errors_and_remap_failure_in_counters_are_critical(tmp_path):
    samples = [sample(m * 60, ecc_dbe_volatile=0, ecc_sbe_volatile=m) for m in range(60)]
    samples += [
        sample(m * 60, ecc_dbe_volatile=2, ecc_sbe_volatile=m, remap_failure=True)
        for m in range(60, 90)
    ]
    found = {f["detector"]: f for f in run(tmp_path, samples)}
    assert sorted(found) == ["ecc_dbe", "row_remap_failure"]
    assert found["ecc_dbe"]["severity"] == "critical"
    assert "2 uncorrectable ECC errors (double-bit), 89 corrected" in found["ecc_dbe"]["message"]
    assert found["ecc_dbe"]["start_ts"] == at(3600)


def test_a_pending_remap_is_a_predicted_warning(tmp_path):
    samples = [sample(m * 60, remap_pending=m >= 30) for m in range(60)]
    [finding] = run(tmp_path, samples)
    assert finding["detector"] == "row_remap_pending"
    assert finding["severity"] == "warn" and finding["predicted"] is True


def event(t, kind, code=None, gpu_index=0):
    return {
        "cluster": CLUSTER,
        "node": "g001",
        "gpu_uuid": f"GPU-{'a' if gpu_index == 0 else gpu_index}",
        "gpu_index": gpu_index,
        "ts": at(t),
        "kind": kind,
        "code": code,
    }


def test_xids_are_classed_hardware_or_application_by_nvidia_catalogue(tmp_path):
    events = [
        event(7200, "xid", 79),  # fell off the bus: hardware, RESTART_BM -> critical
        event(7300, "xid", 13),  # graphics exception: application -> no finding
        event(7400, "xid", 31),  # MMU fault: application -> no finding
        event(7500, "xid", 92),  # high SBE rate: a precursor -> predicted warning
    ]
    # job 42 held GPUs 0-3 from t=0: 4 GPUs x 2 h run when XID 79 came at 7200 s
    intervals = [
        {
            "cluster": CLUSTER,
            "job_id": "42",
            "node": "g001",
            "gpu_index": g,
            "start_ts": at(0),
            "end_ts": at(7250),
            "mapping": "scontrol-idx",
        }
        for g in range(4)
    ]
    jobs = [job("42", 0, 7250, gpus=4)]
    found = {
        f["subject_id"]: f for f in run(tmp_path, events=events, intervals=intervals, jobs=jobs)
    }
    assert sorted(found) == ["GPU-a#xid79", "GPU-a#xid92"]
    fatal = found["GPU-a#xid79"]
    assert fatal["detector"] == "xid_hardware" and fatal["severity"] == "critical"
    assert fatal["job_id"] == "42"
    assert fatal["gpu_h_at_stake"] == pytest.approx(8.0)
    assert "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in fatal["message"]
    assert json.loads(fatal["evidence"])["action"] == "RESTART_BM"
    early = found["GPU-a#xid92"]
    assert early["severity"] == "warn" and early["predicted"] is True


def test_the_job_an_xid_ended_is_the_job_at_risk(tmp_path):
    # Slurm closes the job of a GPU that fell off the bus at the XID's time (NODE_FAIL):
    # its allocation ends at the event, and its 4 GPUs x 2 h are what the XID cost.
    intervals = [
        {
            "cluster": CLUSTER,
            "job_id": "43",
            "node": "g001",
            "gpu_index": g,
            "start_ts": at(0),
            "end_ts": at(7200),
            "mapping": "scontrol-idx",
        }
        for g in range(4)
    ]
    jobs = [job("43", 0, 7200, gpus=4, state="NODE_FAIL")]
    [fatal] = run(tmp_path, events=[event(7200, "xid", 79)], intervals=intervals, jobs=jobs)
    assert fatal["job_id"] == "43"
    assert fatal["gpu_h_at_stake"] == pytest.approx(8.0)
    assert "; 1 job running on it had 8.0 GPU-h at risk" in fatal["message"]


def test_jobs_sharing_the_gpu_an_xid_hit_hold_its_hours_once(tmp_path):
    """Jobs a and b share GPU 0 for 10 h, the XID comes at 9 h: they had 9 GPU-h of it
    between them (4.5 each), not 18 (each 1 GPU × 9 h), more than the GPU gave and than `check`
    lets a finding state."""
    intervals = [
        {
            "cluster": CLUSTER,
            "job_id": job_id,
            "node": "g001",
            "gpu_index": 0,
            "start_ts": at(0),
            "end_ts": at(36000),
            "mapping": "scontrol-idx",
        }
        for job_id in ("a", "b")
    ]
    jobs = [job("a", 0, 36000), job("b", 0, 36000)]
    [fatal] = run(tmp_path, events=[event(9 * 3600, "xid", 79)], intervals=intervals, jobs=jobs)

    assert fatal["gpu_h_at_stake"] == pytest.approx(9.0)
    assert "; 2 jobs running on it had 9.0 GPU-h at risk" in fatal["message"]


def test_a_site_asking_two_double_bit_errors_gets_no_finding_for_one(tmp_path):
    """An ecc_dbe event's code is the GPU's counter after the increase, one event an increase
    (as every collector lands them): a site's dbe_min = 2 was ignored for events."""
    one = [event(3600, "ecc_dbe", 1)]
    counter_to_two = [event(3600, "ecc_dbe", 1), event(3700, "ecc_dbe", 2)]
    three_at_once = [event(3600, "ecc_dbe", 3)]

    assert run(tmp_path, events=one, dbe_min=2) == []
    assert [f["detector"] for f in run(tmp_path, events=counter_to_two, dbe_min=2)] == ["ecc_dbe"]
    assert [f["detector"] for f in run(tmp_path, events=three_at_once, dbe_min=2)] == ["ecc_dbe"]
    assert [f["detector"] for f in run(tmp_path, events=one)] == ["ecc_dbe"]


def test_a_sample_carrying_two_reasons_counts_once_and_only_throttled_work_is_slowed(tmp_path):
    """NVML sets HW slowdown (0x8) with HW thermal (0x40): 12.5 % of samples carrying both
    counted as 25 % and flagged. And the clock lost was applied to every busy sample of the
    hour, not only the throttled ones."""
    both = [sample(m * 60, clock_event_reasons=0x48 if m % 8 == 0 else 0) for m in range(180)]
    assert run(tmp_path, both) == []

    quarter = [
        sample(m * 60, clock_event_reasons=0x40 if m % 4 == 0 else 0, sm_clock_mhz=990.0)
        if m % 4 == 0
        else sample(m * 60)
        for m in range(180)
    ]
    [found] = [f for f in run(tmp_path / "q", quarter) if f["detector"] == "throttling"]
    clock_max = max(s["sm_clock_mhz"] for s in quarter if s["sm_clock_mhz"] is not None)
    slowed = 3 * 0.25 * (1 - 990.0 / clock_max)  # 3 h, a quarter of it throttled
    assert found["gpu_h_at_stake"] == pytest.approx(slowed, rel=0.05)


def test_an_ecc_event_and_its_counter_give_one_finding(tmp_path):
    samples = [sample(m * 60, ecc_dbe_volatile=1) for m in range(60, 90)]
    found = run(tmp_path, samples, events=[event(3600, "ecc_dbe", 1)])
    assert [f["detector"] for f in found] == ["ecc_dbe"]


def test_no_samples_and_no_events_no_findings(tmp_path):
    assert run(tmp_path) == []


def test_mig_instances_repeating_device_fields_count_once(tmp_path):
    hot = [
        sample(m * 60, clock_event_reasons=0x40, sm_clock_mhz=1386.0, mig_instance=i)
        for m in range(60, 180)
        for i in (1, 2)
    ]
    [finding] = run(tmp_path, [sample(m * 60) for m in range(60)] + hot)
    assert finding["gpu_h_at_stake"] == pytest.approx(0.6)  # as for one instance


def test_throttling_under_load_without_an_sm_clock_is_not_called_idle(tmp_path):
    # an exporter without SM_CLOCK: busy GPUs with thermal bits for 30 h are a critical
    # finding with its message, not "idle, no work slowed"
    samples = [
        sample(m * 600, clock_event_reasons=0x40, sm_clock_mhz=None, temp_c=92.0)
        for m in range(6 * 30)
    ]
    [finding] = run(tmp_path, samples)
    assert finding["severity"] == "critical"
    assert "while the GPU was idle" not in finding["message"]
    assert "busy clock ? of" in finding["message"]


def test_one_gsp_xid_in_a_day_is_a_warning_and_a_repeat_is_critical(tmp_path):
    [once] = run(tmp_path, events=[event(3600, "xid", 119)])
    assert once["detector"] == "xid_hardware" and once["severity"] == "warn"
    assert not once["predicted"]
    [again] = run(tmp_path / "b", events=[event(3600, "xid", 120), event(7200, "xid", 120)])
    assert again["severity"] == "critical"


def test_the_hourly_rows_by_hand(tmp_path):
    # GPU-a, hour 0: minutes 0-9 as two MIG instances repeating the device's fields, except
    # that only instance 1 carries the HW-thermal bit and only instance 2 a busy engine (the
    # sample time is merged first: throttled and busy), and instance 2's SM clock is higher.
    # Minutes 10-19 are reported twice (a duplicate landing). Hour 1: one sample, another model.
    # A GPU without a UUID on the same node, keyed by its index; another node's GPU 0.
    mig = [
        sample(m * 60, mig_instance=1, clock_event_reasons=0x40, gpu_util_pct=0.0)
        | {"sm_clock_mhz": 1000.0, "temp_c": 80.0}
        for m in range(10)
    ] + [
        sample(m * 60, mig_instance=2, clock_event_reasons=0, gpu_util_pct=50.0)
        | {"sm_clock_mhz": 1200.0, "ecc_dbe_volatile": 1.0, "remap_pending": True}
        for m in range(10)
    ]
    twice = [sample(m * 60) for m in range(10, 20)] * 2
    later = [sample(3600, model="NVIDIA A100-SXM4-80GB", ecc_sbe_volatile=3.0)]
    unnamed = [sample(m * 60, gpu_uuid=None, gpu_index=1) for m in range(5)]
    other = [sample(0, node="g002", gpu_uuid="GPU-b")]
    con = connection(tmp_path, gpu_samples=mig + twice + later + unnamed + other)

    got = queries.rows(con, health.HOURLY, since=at(0))
    keys = [(r["node"], r["gpu_uuid"], r["gpu_index"], r["hour"]) for r in got]

    assert keys == [
        ("g001", "GPU-a", 0, at(0)),
        ("g001", "GPU-a", 0, at(3600)),
        ("g001", None, 1, at(0)),
        ("g002", "GPU-b", 0, at(0)),
    ]
    a0, a1 = (r for r in got if r["gpu_uuid"] == "GPU-a")
    assert a0["samples"] == 20  # 10 MIG times + 10 duplicated times, each once
    assert a0["thermal_samples"] == 10
    assert a0["busy_samples"] == 20
    assert a0["throttled_busy_samples"] == 10
    assert a0["clock_throttled_mean"] == pytest.approx(1200.0)  # the merged time's highest
    assert a0["temp_max"] == 80.0
    assert (a0["dbe_min"], a0["dbe_max"], a0["remap_pending"]) == (1.0, 1.0, True)
    assert a0["model"] == H100
    assert (a1["samples"], a1["model"], a1["sbe_max"]) == (1, "NVIDIA A100-SXM4-80GB", 3.0)
    unnamed_row = next(r for r in got if r["gpu_uuid"] is None)
    assert (unnamed_row["samples"], unnamed_row["remap_failure"]) == (5, False)
