"""`parse_sacct`: real Slurm 22.05 output and hand-made edge cases into `jobs` rows."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.sources.slurm.sacct import SACCT_FIELDS, jobs_table, parse_sacct
from warehouse.schema import RAW_TABLES
from warehouse.writer import conform


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


@pytest.fixture
def first_cluster(fixture_text):
    jobs, malformed = parse_sacct(fixture_text("first-cluster/sacct.txt"))
    assert malformed == []
    return {j.job_id: j for j in jobs}


@pytest.fixture
def edge(fixture_text):
    jobs, malformed = parse_sacct(fixture_text("handmade/sacct-edge-cases.txt"))
    return {j.job_id: j for j in jobs}, malformed


def test_real_output_gives_one_job_per_allocation_and_none_per_step(first_cluster):
    assert list(first_cluster) == [
        "1", "2", "3", "4", "5", "6", "8", "7_0", "7_1", "7_2", "7_3",
        "12", "13", "14", "15", "16", "17", "18",
    ]  # fmt: skip


def test_array_tasks_keep_their_display_id_and_jobidraw(first_cluster):
    assert first_cluster["7_0"].job_id_raw == "9"
    assert first_cluster["7_3"].job_id_raw == "7"  # the last task reuses the array's id


def test_real_values_are_read_as_slurm_means_them(first_cluster):
    one = first_cluster["1"]
    assert (one.user, one.account, one.partition, one.state) == (
        "alice",
        "research",
        "gpu",
        "COMPLETED",
    )
    assert (one.submit_ts, one.start_ts, one.end_ts) == (
        ms("2026-12-02T13:01:09"),
        ms("2026-12-02T13:01:10"),
        ms("2026-12-02T13:01:30"),
    )
    assert (one.gpus, one.gpus_requested, one.gpu_type, one.nodes) == (2, 2, "h100", ("vm",))
    assert one.time_limit_s is None  # UNLIMITED
    assert first_cluster["6"].time_limit_s is None  # Partition_Limit
    assert first_cluster["8"].time_limit_s == 365 * 86400
    assert first_cluster["14"].time_limit_s == 600
    assert first_cluster["15"].state == "CANCELLED by 0"
    assert first_cluster["17"].exit_code == "9:0"  # exit 137, shown minus 128
    assert first_cluster["14"].mem_req_mib == 8192  # mem=8G of ReqTRES (no ReqMem field)


def test_a_pending_job_cancelled_before_it_ran_has_no_nodes_and_no_gpus(fixture_text):
    jobs, _ = parse_sacct(fixture_text("two-node-cluster/sacct.txt"))
    seven = next(j for j in jobs if j.job_id == "7")
    assert seven.start_ts is None  # Start=None
    assert seven.nodes == ()  # None assigned
    assert (seven.gpus, seven.gpus_requested) == (0, 8)
    assert seven.state == "CANCELLED by 1003"


def test_a_two_node_job_with_two_gpu_types_counts_its_gpus_once(fixture_text):
    jobs, _ = parse_sacct(fixture_text("two-node-cluster/sacct.txt"))
    six = next(j for j in jobs if j.job_id == "6")
    assert six.nodes == ("gpu-node01", "gpu-node02")
    assert (six.gpus, six.gpu_type) == (8, "a100,h100")


def test_steps_fold_into_their_job_so_sacct_and_sacct_x_agree(fixture_text):
    with_steps, _ = parse_sacct(fixture_text("first-cluster/sacct.txt"))
    allocations, _ = parse_sacct(fixture_text("first-cluster/sacct-X.txt"))
    assert with_steps == allocations


def test_a_header_line_sets_the_fields_and_an_explicit_list_does_the_same(fixture_text):
    text = fixture_text("first-cluster/sacct-X.txt")
    header, body = text.split("\n", 1)
    assert parse_sacct(body, fields=header.split("|")) == parse_sacct(text)


def test_a_job_name_with_the_delimiter_is_joined_back(edge):
    jobs, _ = edge
    assert jobs["100"].job_name == "ddp|train|v2"
    assert jobs["100"].nodes == (
        "gpu-node01",
        "gpu-node02",
        "gpu-node03",
        "gpu-node04",
        "gpu-node07",
    )


def test_step_cpu_time_is_summed_and_peak_memory_is_the_largest(edge):
    jobs, _ = edge
    # 01:00:00 + 00:00.500 + 1-02:03:04 over the batch, extern and .0 steps
    assert jobs["100"].cpu_time_s == pytest.approx(3600 + 0.5 + 93784)
    assert jobs["100"].max_rss_mib == pytest.approx(30.5 * 1024)  # 30.5G beats 2.50G and 1024K
    assert jobs["101"].cpu_time_s == 600  # no step listed: the job's own TotalCPU
    assert jobs["101"].max_rss_mib is None


def test_requested_memory_per_cpu_and_per_node_is_scaled(edge):
    jobs, _ = edge
    assert jobs["101"].mem_req_mib == 8000  # 4000Mc x 2 CPUs
    assert jobs["102"].mem_req_mib == 16000  # 16000Mn x 1 node (pending: at least one)
    assert jobs["100"].mem_req_mib == 512 * 1024


def test_typed_only_gpus_and_unlimited_limits_and_cancel_reasons(edge):
    jobs, _ = edge
    assert (jobs["101"].gpus, jobs["101"].gpu_type) == (2, "a100")
    assert jobs["101"].time_limit_s is None
    assert jobs["101"].state == "CANCELLED by 1001"
    assert jobs["102"].time_limit_s is None
    assert jobs["102"].start_ts is None and jobs["102"].end_ts is None  # Unknown


def test_a_pending_array_becomes_one_pending_job_per_task(edge):
    jobs, _ = edge
    tasks = {k: v for k, v in jobs.items() if k.startswith("103_")}
    assert sorted(tasks) == ["103_1", "103_2", "103_3", "103_4", "103_5"]
    assert tasks["103_1"].state == "COMPLETED" and tasks["103_1"].job_id_raw == "104"
    for task in ("103_2", "103_3", "103_4", "103_5"):
        assert tasks[task].state == "PENDING"
        assert tasks[task].job_id_raw is None  # given only when the task starts
        assert tasks[task].gpus_requested == 1


@pytest.mark.parametrize(
    ("job_id", "interactive"),
    [
        ("110", True),  # named interactive (salloc)
        ("111", True),  # no batch step, its step runs bash (srun --pty bash)
        ("112", True),  # an `interactive` step (use_interactive_step)
        ("100", False),  # a batch job with steps
        ("101", False),
    ],
)
def test_interactive_jobs_are_recognised(edge, job_id, interactive):
    jobs, _ = edge
    assert jobs[job_id].interactive is interactive


def test_a_requeued_job_counts_its_earlier_runs_and_keeps_its_first_submit(edge):
    jobs, _ = edge
    job = jobs["120"]
    assert job.requeues == 1
    assert job.state == "RUNNING" and job.end_ts is None
    assert job.submit_ts == ms("2026-12-02T09:00:00")  # the REQUEUED run's submit
    assert job.start_ts == ms("2026-12-02T09:35:00")  # the current run's start
    assert job.nodes == ("gpu-node05",)
    assert not job.finished


def test_the_restarts_field_of_newer_sacct_gives_the_requeue_count(fixture_text):
    jobs, malformed = parse_sacct(fixture_text("handmade/sacct-restarts.txt"))
    assert malformed == []
    assert [(j.job_id, j.requeues, j.max_rss_mib) for j in jobs] == [("200", 2, 3072.0)]


def test_het_job_components_are_separate_jobs(edge):
    jobs, _ = edge
    assert (jobs["130+0"].job_id_raw, jobs["130+1"].job_id_raw) == ("130", "131")
    assert jobs["130+1"].gpus == 0


def test_malformed_lines_are_skipped_counted_and_explained(edge):
    jobs, malformed = edge
    assert [(m.line_no, m.source) for m in malformed] == [
        (19, "sacct"),
        (20, "sacct"),
        (21, "sacct"),
        (22, "sacct"),
    ]
    assert "7 fields, expected 20" in malformed[0].reason
    assert "Submit: invalid time '2026-13-45T99:00:00'" in malformed[1].reason
    assert "JobID: invalid job id 'abc'" in malformed[2].reason
    assert "NodeList" in malformed[3].reason and "gpu-node[01-" in malformed[3].reason
    assert str(malformed[2]).startswith("sacct line 21: ")
    assert not {"140", "141", "142"} & set(jobs)
    assert jobs["143"].job_name == "after-the-bad-lines"  # the rest still parses


def test_an_extra_delimiter_without_a_jobname_field_is_malformed():
    fields = ["JobID", "JobIDRaw", "State"]
    jobs, malformed = parse_sacct("1|1|COMPLETED|oops\n2|2|FAILED\n", fields=fields)
    assert [j.job_id for j in jobs] == ["2"]
    assert malformed[0].line_no == 1 and "4 fields, expected 3" in malformed[0].reason


def test_times_are_converted_from_the_zone_sacct_printed_them_in(fixture_text):
    text = fixture_text("first-cluster/sacct-X.txt")
    utc = {j.job_id: j for j in parse_sacct(text)[0]}
    berlin = {j.job_id: j for j in parse_sacct(text, tz=dt.timezone(dt.timedelta(hours=1)))[0]}
    assert berlin["1"].start_ts == utc["1"].start_ts - 3_600_000


NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


def test_a_job_across_the_repeated_hour_of_daylight_saving_time_ends_after_its_start():
    """The probe's 40-minute job, 01:50 EDT to 01:30 EST on 2026-11-01: both local times read
    as their first occurrence put its end before its start, and it held 4 GPUs for no time."""
    fields = ["JobID", "JobIDRaw", "State", "Start", "End"]
    text = (
        "1|1|COMPLETED|2026-11-01T01:50:00|2026-11-01T01:30:00\n"
        "2|2|COMPLETED|2026-11-01T01:10:00|2026-11-01T01:40:00\n"
    )

    jobs = {j.job_id: j for j in parse_sacct(text, fields=fields, tz=NEW_YORK)[0]}

    assert (jobs["1"].start_ts, jobs["1"].end_ts) == (
        ms("2026-11-01T05:50:00"),
        ms("2026-11-01T06:30:00"),
    )
    # within one occurrence the first is kept: the text cannot tell which
    assert jobs["2"].end_ts - jobs["2"].start_ts == 30 * 60_000


def test_empty_output_gives_no_jobs_and_no_errors():
    assert parse_sacct("") == ([], [])


NAMES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\n\r"),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip() == s)


@given(name=NAMES)
def test_any_job_name_survives_parsing(name):
    values = dict.fromkeys(SACCT_FIELDS, "")
    values.update(JobID="5", JobIDRaw="5", State="COMPLETED", JobName=name)
    line = "|".join(values[f] for f in SACCT_FIELDS)

    jobs, malformed = parse_sacct(line)

    assert malformed == []
    assert jobs[0].job_name == name


def test_the_jobs_table_has_the_contracts_exact_types(edge):
    jobs, _ = edge
    table = jobs_table("c1", jobs.values(), ms("2026-12-02T12:00:00"))
    assert table.schema == RAW_TABLES["jobs"].schema
    assert conform(RAW_TABLES["jobs"], table).num_rows == len(jobs)
    row = table.filter(pc.equal(table["job_id"], "100")).to_pylist()[0]
    assert row["nodes"][-1] == "gpu-node07"
    assert row["start_ts"] == dt.datetime(2026, 12, 2, 10, 0, 5, tzinfo=dt.UTC)
    assert (row["cluster"], row["source"]) == ("c1", "slurm")


def test_a_task_with_its_own_record_is_not_overwritten_by_the_pending_array():
    fields = ["JobID", "JobIDRaw", "State", "JobName"]
    text = "7_2|12|RUNNING|sweep\n7_[2-3]|7|PENDING|sweep\n"

    jobs, _ = parse_sacct(text, fields=fields)

    assert [(j.job_id, j.state) for j in jobs] == [("7_2", "RUNNING"), ("7_3", "PENDING")]


# the probe's: eve's 1-GPU, 1-hour job named "real", then a line break and a whole record
INJECTED = (
    "600|600|eve|research|gpu|normal|COMPLETED|0:0|2026-12-02T10:00:00|2026-12-06T10:00:00|"
    "2026-12-06T11:00:00|1-00:00:00|cpu=1,gres/gpu=1,node=1|billing=2,cpu=2,gres/gpu=2,"
    "mem=16000M,node=1|vm|2|16000M|00:10:00||real\n"
    "600|600|carol|ml|gpu|normal|COMPLETED|0:0|2026-12-02T10:00:00|2026-12-06T00:00:00|"
    "2026-12-07T00:00:00|1-00:00:00|cpu=8,gres/gpu=8,node=1|billing=2,cpu=2,gres/gpu=2,"
    "mem=16000M,node=1|vm|2|16000M|00:10:00||fake\n"
)


def test_a_job_name_holding_a_line_break_and_a_record_takes_nothing_over(edge):
    """Slurm stores a name as given: with sacct's `|`, the line after the break read as a
    record of its own and replaced the job (carol, 8 GPUs for 24 h). With a delimiter users
    cannot know (the collector's), that line holds no field: skipped and said."""
    nonce = "|gl0123456789ab|"
    first, second, _ = INJECTED.split("\n")
    text = first.replace("|", nonce, len(SACCT_FIELDS) - 1) + "\n" + second + "\n"

    [job], malformed = parse_sacct(text, delimiter=nonce)

    assert [(m.line_no, m.reason.split(" (")[0]) for m in malformed] == [
        (2, f"1 fields, expected {len(SACCT_FIELDS)}")
    ]
    assert (job.user, job.gpus, job.start_ts, job.end_ts) == (
        "eve",
        1,
        ms("2026-12-06T10:00:00"),
        ms("2026-12-06T11:00:00"),
    )


def test_with_the_default_delimiter_such_a_name_still_takes_over(edge):
    """Why the collector gives sacct its own delimiter: `|` cannot tell the two apart."""
    jobs, _ = parse_sacct(INJECTED)

    assert [(j.user, j.gpus) for j in jobs] == [("carol", 8)]
