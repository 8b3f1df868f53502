"""Two cluster names that clean to one folder (`gpu farm` / `gpu_farm`) are refused at landing
(#22 LOW 11): the lake records the raw name of each cluster folder, and a second raw name for
the same folder is one clear error instead of two clusters' rows mixed in one folder."""

from __future__ import annotations

import os
import threading

import pyarrow as pa
import pytest
from click.testing import CliRunner

from app.cli import cli
from warehouse import layout, writer
from warehouse.connection import connect
from warehouse.errors import ClusterNameClash
from warehouse.schema import TABLES


def test_a_second_name_for_the_same_folder_is_refused(lake, make_samples, t0):
    writer.write_batch(lake, "gpu_samples", make_samples([t0], cluster="gpu farm"), "b1")
    with pytest.raises(ClusterNameClash) as err:
        writer.write_batch(lake, "gpu_samples", make_samples([t0], cluster="gpu_farm"), "b2")
    assert str(err.value).startswith(
        "cluster 'gpu_farm' would land in the folder cluster=gpu_farm that holds cluster 'gpu farm'"
    )
    with connect(lake) as con:
        assert con.sql("SELECT DISTINCT cluster FROM gpu_samples").fetchall() == [("gpu farm",)]
    # the same raw name lands again as before, in every table
    writer.write_batch(lake, "gpu_samples", make_samples([t0], cluster="gpu farm"), "b3")
    assert (lake / "_state" / "clusters" / "gpu_farm.name").read_text() == "gpu farm"


def test_two_names_of_one_folder_in_one_batch_are_refused_and_nothing_lands(lake, make_samples, t0):
    rows = pa.concat_tables([make_samples([t0], cluster="a/b"), make_samples([t0], cluster="a_b")])
    with pytest.raises(ClusterNameClash):
        writer.write_batch(lake, "gpu_samples", rows, "b1")
    assert layout.table_files(lake, "gpu_samples") == []


def test_a_mart_partition_checks_its_cluster_too(lake, make_samples, t0):
    writer.write_batch(lake, "gpu_samples", make_samples([t0], cluster="gpu farm"), "b1")
    schema = TABLES["usage_daily"].schema
    row = {f.name: None for f in schema} | {"cluster": "gpu_farm", "date": t0.date()}
    mart = pa.Table.from_pylist([row], schema=schema)
    with pytest.raises(ClusterNameClash):
        writer.replace_partition(lake, "usage_daily", mart, "gpu_farm", t0.date())
    assert not (lake / "usage_daily").exists()


def test_racing_writers_of_two_names_see_one_winner(lake, make_samples, t0):
    names = ["gpu farm", "gpu_farm", "gpu+farm", "gpu farm", "gpu_farm", "gpu+farm"]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(names))

    def land(i: int, name: str) -> None:
        barrier.wait()
        try:
            writer.write_batch(lake, "gpu_samples", make_samples([t0], cluster=name), f"b{i}")
            outcomes.append(name)
        except ClusterNameClash:
            outcomes.append("refused")

    threads = [threading.Thread(target=land, args=(i, n)) for i, n in enumerate(names)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winner = (lake / "_state" / "clusters" / "gpu_farm.name").read_text()
    assert sorted(outcomes) == sorted([winner, winner] + ["refused"] * 4)
    assert oct(os.stat(lake / "_state" / "clusters" / "gpu_farm.name").st_mode & 0o777) == "0o640"


def test_the_clash_is_one_line_from_a_command(tmp_path):
    lake = tmp_path / "lake"
    args = ["simulate", "--lake", str(lake), "--gpus", "4", "--days", "1", "--seed", "1"]
    first = CliRunner().invoke(cli, [*args, "--cluster", "gpu farm"])
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(cli, [*args, "--cluster", "gpu_farm"])
    assert second.exit_code == 1, second.output
    assert "cluster 'gpu_farm' would land in the folder cluster=gpu_farm" in second.output
    assert "Traceback" not in second.output


def test_a_cluster_whose_name_is_not_its_folders_is_attributed_on_a_day_no_job_ran(tmp_path):
    """A mart with no row that day (no job: job_gpu_daily, job_energy_hourly) replaced its
    partition under the folder's safe name, 'gpu_farm', refused as another cluster's name:
    `attribute` stopped on every idle day of a cluster named 'gpu farm'."""
    from tests.marts import rows as r

    con = r.build_lake(
        tmp_path, samples=r.samples(range(0, 600, 30), cluster="gpu farm", engine_active=0.0)
    )

    [(cluster, gpu_h)] = con.sql(
        "SELECT cluster, sum(observed_s) / 3600 FROM gpu_job_buckets GROUP BY cluster"
    ).fetchall()
    assert cluster == "gpu farm" and gpu_h == pytest.approx(600 / 3600)
    assert con.sql("SELECT count(*) FROM job_gpu_daily").fetchall() == [(0,)]
