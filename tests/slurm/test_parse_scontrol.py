"""`parse_scontrol_show_job`: which job holds which GPU, from `scontrol show job -d`."""

from __future__ import annotations

import datetime as dt

import pytest

from collector.sources.slurm.sacct import job_gpus_table, parse_scontrol_show_job
from warehouse.schema import RAW_TABLES
from warehouse.writer import conform


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def gpus(job):
    return [(a.node, a.gpu_index, a.mapping) for a in job.allocations]


@pytest.fixture
def edge(fixture_text):
    jobs, malformed = parse_scontrol_show_job(
        fixture_text("handmade/scontrol-show-job-d-edge-cases.txt")
    )
    return {j.job_id: j for j in jobs}, malformed


def test_a_running_job_gets_one_row_per_indexed_gpu(fixture_text):
    [job], malformed = parse_scontrol_show_job(
        fixture_text("two-node-cluster/scontrol_show_job_d_running.txt")
    )
    assert malformed == []
    assert (job.job_id, job.state, job.holds_resources) == ("2", "RUNNING", True)
    assert gpus(job) == [("gpu-node01", i, "scontrol-idx") for i in (2, 3, 4, 5)]
    assert {(a.start_ts, a.end_ts) for a in job.allocations} == {(ms("2026-12-02T13:17:30"), None)}
    assert job.job_name == "big-sweep"


def test_a_multi_node_job_gets_each_nodes_own_indices(fixture_text):
    [job], _ = parse_scontrol_show_job(
        fixture_text("first-cluster/scontrol-show-job-d-multinode.txt")
    )
    assert gpus(job) == [("gpu-node01", i, "scontrol-idx") for i in (4, 5, 6, 7)] + [
        ("gpu-node02", i, "scontrol-idx") for i in (0, 1, 2, 3)
    ]


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("JobName=ddp-2node", "JobName=x Nodes=gpu-node09 GRES=gpu:8(IDX:0-7)"),
        ("JobName=ddp-2node", "JobName=x ArrayJobId=999 ArrayTaskId=1 Shared=0"),
        ("JobName=ddp-2node", "JobName=x\n   Nodes=gpu-node09 GRES=gpu:8(IDX:0-7)"),
        ("WorkDir=/home/alice", "WorkDir=/home/alice/my Nodes=gpu-node07 GRES=gpu:4(IDX:0-3)"),
        ("WorkDir=/home/alice", "WorkDir=/home/a\n     Nodes=gpu-node07 GRES=gpu:4(IDX:0-3)"),
        # (the probe's: a comment naming another user, a running state and another job's GPUs)
        (
            "WorkDir=/home/alice",
            "WorkDir=/home/alice\n   Comment=z UserId=eve(1) JobState=RUNNING "
            "NodeList=gpu-node09 TRES=gres/gpu=8 Nodes=gpu-node09 GRES=gpu:h100:8(IDX:0-7)",
        ),
    ],
    ids=[
        "name-nodes",
        "name-array-shared",
        "name-newline",
        "workdir-space",
        "workdir-newline",
        "comment-fields",
    ],
)
def test_a_jobs_name_or_directory_adds_no_field(fixture_text, field, text):
    # a user's words (a name with spaces, a directory) that read like fields: no GPU on a node
    # the job never ran on, no other job id, no whole node
    record = fixture_text("first-cluster/scontrol-show-job-d-multinode.txt")
    [clean], _ = parse_scontrol_show_job(record)
    assert field in record
    [job], malformed = parse_scontrol_show_job(record.replace(field, text))
    assert malformed == []
    assert (job.job_id, job.exclusive, gpus(job)) == (clean.job_id, clean.exclusive, gpus(clean))


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("JobName=ddp-2node", "JobName=x\n   UserId=eve(1) Nodes=gpu-node09 GRES=gpu:8(IDX:0-7)"),
        (
            "WorkDir=/home/alice",
            "WorkDir=/home/alice\n   Comment=z\n   UserId=eve(1) JobState=RUNNING\n"
            "     Nodes=gpu-node09 CPU_IDs=0 Mem=8192 GRES=gpu:8(IDX:0-7)",
        ),
    ],
    ids=["name", "comment"],
)
def test_a_record_whose_free_text_holds_a_second_user_line_is_not_read(fixture_text, field, text):
    """Slurm stores a name or comment with line breaks as given: lines that read as the
    record's own (a second UserId line, a node line) cannot be told from Slurm's, so the record
    is skipped and said, its GPUs unmapped, never mapped to another job's."""
    record = fixture_text("first-cluster/scontrol-show-job-d-multinode.txt")
    assert field in record

    jobs, malformed = parse_scontrol_show_job(record.replace(field, text))

    assert jobs == []
    assert [m.reason for m in malformed] == [
        "2 lines start with UserId=: the job's name or free text holds lines that read as its "
        "fields; not read"
    ]


def test_a_job_listed_twice_is_given_twice_with_its_user(fixture_text):
    """A comment holding a line break and `JobId=22 …` lists job 22 twice: the parser gives
    both copies, each with its UserId's name, for the collector to keep the one sacct vouches
    for (tests/slurm/test_collect_slurm.py)."""
    record = fixture_text("first-cluster/scontrol-show-job-d-multinode.txt")
    [job], _ = parse_scontrol_show_job(record)

    jobs, malformed = parse_scontrol_show_job(record + "\n" + record)

    assert malformed == [] and jobs == [job, job]
    assert job.user is not None and "(" not in job.user


def test_a_mig_slice_named_after_its_gpu_model_is_unmapped():
    """AutoDetect=nvml names MIG types after the model (`a100_1g.10gb`): its IDX is a MIG
    device's, not the GPU's ordinal (it mapped a whole GPU 2 to the job)."""
    text = (
        "JobId=7 JobName=m\n   UserId=eve(1) GroupId=eve(1)\n   JobState=RUNNING Reason=None\n"
        "   StartTime=2026-12-02T10:00:00 EndTime=2026-12-03T10:00:00\n"
        "   NodeList=gpu01\n   TRES=cpu=1,node=1,gres/gpu=1\n"
        "     Nodes=gpu01 CPU_IDs=0 Mem=0 GRES=gpu:a100_1g.10gb:1(IDX:2)\n"
        "   OverSubscribe=OK\n"
    )

    [job], malformed = parse_scontrol_show_job(text)

    assert malformed == [] and job.allocations == () and job.unmapped_gpus


def test_several_jobs_in_one_output_and_a_pending_one_without_gpus(fixture_text):
    jobs, malformed = parse_scontrol_show_job(
        fixture_text("first-cluster/scontrol-show-job-d-running.txt")
    )
    assert malformed == []
    assert [(j.job_id, j.state, len(j.allocations)) for j in jobs] == [
        ("15", "RUNNING", 2),
        ("14", "RUNNING", 4),
        ("18", "PENDING", 0),
    ]
    assert not jobs[2].holds_resources and jobs[2].start_ts is None
    assert not jobs[2].unmapped_gpus  # pending: nothing to map yet


def test_array_tasks_and_het_components_get_their_sacct_ids(edge):
    jobs, _ = edge
    assert jobs["7_1"].job_id_raw == "10"
    assert gpus(jobs["7_1"]) == [("gpu-node03", 3, "scontrol-idx")]
    assert gpus(jobs["130+1"]) == [("gpu-node02", 1, "scontrol-idx")]


def test_grouped_nodes_share_an_index_list_with_gaps(edge):
    jobs, _ = edge
    assert gpus(jobs["300"]) == [
        (node, i, "scontrol-idx") for node in ("gpu-node03", "gpu-node04") for i in (0, 2, 3)
    ]
    assert jobs["300"].job_name == "two nodes, three gpus each"


def test_exclusive_jobs_without_indices_hold_whole_nodes(edge):
    jobs, _ = edge
    assert gpus(jobs["301"]) == [("gpu-node05", None, "whole-node")]  # -d line, empty GRES
    assert gpus(jobs["302"]) == [  # no -d lines at all
        ("gpu-node06", None, "whole-node"),
        ("gpu-node07", None, "whole-node"),
    ]
    assert not jobs["302"].unmapped_gpus


def test_shared_jobs_without_indices_and_mig_slices_are_flagged_not_guessed(edge):
    jobs, _ = edge
    assert jobs["303"].allocations == () and jobs["303"].unmapped_gpus
    assert jobs["306"].allocations == () and jobs["306"].unmapped_gpus


def test_a_finished_job_has_its_rows_closed_at_its_end(edge):
    jobs, _ = edge
    job = jobs["304"]
    assert not job.holds_resources
    assert [(a.gpu_index, a.end_ts) for a in job.allocations] == [(5, ms("2026-12-02T11:00:00"))]


def test_a_running_jobs_projected_end_is_not_taken_as_its_end(edge):
    jobs, _ = edge
    assert jobs["7_1"].end_ts is None  # EndTime= is start + limit while it runs


def test_one_line_records_parse_like_multi_line_ones(edge):
    jobs, _ = edge
    assert jobs["305"].job_name == "one liner job"
    assert gpus(jobs["305"]) == [
        ("gpu-node09", 0, "scontrol-idx"),
        ("gpu-node09", 1, "scontrol-idx"),
    ]


def test_restarts_are_read(edge):
    jobs, _ = edge
    assert jobs["307"].restarts == 2


def test_a_bad_record_is_skipped_and_reported_with_its_line(edge):
    jobs, malformed = edge
    assert len(jobs) == 10  # eleven records, one bad
    assert [(m.source, m.line_no, m.reason) for m in malformed] == [
        ("scontrol", 216, "invalid JobId 'abc'")
    ]


def test_no_jobs_is_not_an_error():
    assert parse_scontrol_show_job("No jobs in the system\n") == ([], [])
    assert parse_scontrol_show_job("") == ([], [])


def test_times_are_converted_from_the_given_zone(fixture_text):
    text = fixture_text("two-node-cluster/scontrol_show_job_d_running.txt")
    [utc], _ = parse_scontrol_show_job(text)
    [cet], _ = parse_scontrol_show_job(text, tz=dt.timezone(dt.timedelta(hours=1)))
    assert cet.start_ts == utc.start_ts - 3_600_000


def test_the_job_gpus_table_has_the_contracts_exact_types(edge):
    jobs, _ = edge
    rows = [a for j in jobs.values() for a in j.allocations]
    table = job_gpus_table("c1", rows)
    assert table.schema == RAW_TABLES["job_gpus"].schema
    assert conform(RAW_TABLES["job_gpus"], table).num_rows == len(rows)
    whole = [r for r in table.to_pylist() if r["mapping"] == "whole-node"]
    assert {r["gpu_index"] for r in whole} == {None}


def test_a_gpu_index_past_the_contracts_range_is_a_malformed_record(fixture_text):
    # int16 holds it not: a traceback in the table's build, at every run while the job ran
    record = fixture_text("first-cluster/scontrol-show-job-d-multinode.txt")
    jobs, malformed = parse_scontrol_show_job(record.replace("IDX:4-7", "IDX:40000"))
    assert jobs == []
    assert len(malformed) == 1 and "GPU index past 32767" in str(malformed[0])
