"""kg_co2e in job_usage and usage_daily on hand-made rows: a constant intensity, hourly values
with a job spanning two hours, hours the CSV lacks, unknown energy or intensity."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.infra.examples import examples
from tests.marts import rows as r
from warehouse import queries
from warehouse.attribution import AttributionConfig, build_marts
from warehouse.connection import WarehouseConfig, connect, register_table
from warehouse.emissions import CarbonIntensity, ClusterIntensity, register_intensity
from warehouse.partitions import SAMPLE_MARTS, build_sample_marts
from warehouse.schema import TABLES
from warehouse.summary import refresh_summary_marts

KWH = 3_600_000.0  # J per kWh
HOUR0 = int(r.T0_E)  # the first hour of the test day, epoch seconds
HOUR1 = HOUR0 + 3600


def two_hour_job(tmp_path, intensity: CarbonIntensity, *, power_w: float | None = 100.0):
    """j1 on one GPU over [3000, 4200): 20 samples of 30 s in hour 0, 20 in hour 1 (the sample at
    4200 is nobody's), each drawing `power_w` (None: no power reading)."""
    times = range(3000, 4230, 30)
    fields = {} if power_w is None else {"power_w": [power_w] * len(times)}
    return r.build_lake(
        tmp_path,
        samples=r.samples(times, engine_active=0.5, **fields),
        jobs=[r.job("j1", 3000, 4200, user="ann", account="physics")],
        job_gpus=[r.job_gpu("j1", 3000, 4200)],
        config=AttributionConfig(emissions=intensity),
    )


def test_a_constant_intensity_is_kwh_times_grams_over_1000(tmp_path):
    con = two_hour_job(tmp_path, CarbonIntensity(clusters=(ClusterIntensity("della", 380.0),)))
    job = r.by_job(con)["j1"]

    # 40 samples × 100 W × 30 s = 120 000 J
    assert job["energy_kwh"] == pytest.approx(120_000 / KWH)
    assert job["kg_co2e"] == pytest.approx(120_000 / KWH * 380 / 1000)
    assert job["co2e_fallback_hours"] == 0


def test_hourly_values_count_each_hours_energy_at_that_hours_intensity(tmp_path):
    hourly = ClusterIntensity("della", csv="della.csv", hours=((HOUR0, 300.0), (HOUR1, 500.0)))
    con = two_hour_job(tmp_path, CarbonIntensity(clusters=(hourly,)))
    job = r.by_job(con)["j1"]

    # 60 000 J in each hour: (60 000 / 3.6e6 kWh × 300 g + 60 000 / 3.6e6 kWh × 500 g) / 1000
    assert job["kg_co2e"] == pytest.approx((60_000 * 300 + 60_000 * 500) / KWH / 1000)
    assert job["kg_co2e"] == pytest.approx(0.0133333333)
    assert job["co2e_fallback_hours"] == 0
    [day] = r.fetch(con, "SELECT kg_co2e, energy_kwh FROM usage_daily WHERE user = 'ann'")
    assert day["kg_co2e"] == pytest.approx(job["kg_co2e"])


def test_hours_the_csv_lacks_fall_back_to_the_clusters_constant_and_are_counted(tmp_path):
    hourly = ClusterIntensity("della", g_per_kwh=200.0, csv="della.csv", hours=((HOUR1, 500.0),))
    con = two_hour_job(tmp_path, CarbonIntensity(default_g_per_kwh=999.0, clusters=(hourly,)))
    job = r.by_job(con)["j1"]

    assert job["kg_co2e"] == pytest.approx((60_000 * 200 + 60_000 * 500) / KWH / 1000)
    assert job["co2e_fallback_hours"] == 1


def test_without_a_cluster_constant_the_default_stands_in_for_missing_hours(tmp_path):
    hourly = ClusterIntensity("della", csv="della.csv", hours=((HOUR0, 300.0),))
    con = two_hour_job(tmp_path, CarbonIntensity(default_g_per_kwh=450.0, clusters=(hourly,)))
    job = r.by_job(con)["j1"]

    assert job["kg_co2e"] == pytest.approx((60_000 * 300 + 60_000 * 450) / KWH / 1000)
    assert job["co2e_fallback_hours"] == 1


def test_a_cluster_not_listed_takes_the_default(tmp_path):
    other = ClusterIntensity("elsewhere", g_per_kwh=10.0)
    con = two_hour_job(tmp_path, CarbonIntensity(default_g_per_kwh=450.0, clusters=(other,)))

    assert r.by_job(con)["j1"]["kg_co2e"] == pytest.approx(120_000 / KWH * 450 / 1000)


def test_unknown_energy_or_unknown_intensity_is_null_never_zero(tmp_path):
    no_power = two_hour_job(tmp_path / "a", CarbonIntensity(default_g_per_kwh=450.0), power_w=None)
    job = r.by_job(no_power)["j1"]
    assert job["energy_kwh"] is None
    assert job["kg_co2e"] is None
    # ... and so are the user's day and week, as the API's usage: they said 0.0 kWh
    [day] = r.fetch(no_power, "SELECT energy_kwh, kg_co2e FROM usage_daily WHERE user = 'ann'")
    assert (day["energy_kwh"], day["kg_co2e"]) == (None, None)
    weeks = r.fetch(
        no_power, "SELECT level, energy_kwh FROM fairness_weekly WHERE account = 'physics'"
    )
    assert weeks and all(week["energy_kwh"] is None for week in weeks)

    unconfigured = two_hour_job(tmp_path / "b", CarbonIntensity())
    job = r.by_job(unconfigured)["j1"]
    assert job["energy_kwh"] == pytest.approx(120_000 / KWH)
    assert job["kg_co2e"] is None
    [day] = r.fetch(unconfigured, "SELECT kg_co2e FROM usage_daily WHERE user = 'ann'")
    assert day["kg_co2e"] is None


def test_a_zero_intensity_is_zero_kg(tmp_path):
    con = two_hour_job(tmp_path, CarbonIntensity(default_g_per_kwh=0.0))

    assert r.by_job(con)["j1"]["kg_co2e"] == 0.0


# --- the bound: no more than the job's energy at the highest intensity it met --------------

_hours = st.lists(
    st.tuples(
        st.integers(0, 47),  # the hour after T0
        st.floats(0, 5e6, allow_nan=False),  # energy_j in that hour
        st.one_of(st.none(), st.floats(0, 2000, allow_nan=False)),  # the CSV's value (None: lacks)
    ),
    min_size=1,
    max_size=12,
    unique_by=lambda h: h[0],
)


@pytest.fixture(scope="module")
def empty_lake(tmp_path_factory):
    """A connection with every table's view, empty."""
    con = connect(tmp_path_factory.mktemp("empty"))
    yield con
    con.close()


def _typed(name: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=TABLES[name].schema)


@settings(max_examples=examples(25), deadline=None)
@given(hours=_hours, constant=st.floats(0, 2000, allow_nan=False))
def test_kg_co2e_never_exceeds_kwh_times_the_highest_intensity(empty_lake, hours, constant):
    con = empty_lake
    energy = [
        {
            "cluster": r.CLUSTER,
            "job_id": "j1",
            "hour": r.at(h * 3600),
            "date": (r.T0 + dt.timedelta(hours=h)).date(),
            "energy_j": e,
        }
        for h, e, _ in hours
    ]
    daily = [
        {
            "cluster": r.CLUSTER,
            "job_id": "j1",
            "device": "GPU-g001-0",
            "date": row["date"],
            "energy_j": row["energy_j"],
        }
        for row in energy
    ]
    con.register("job_energy_hourly", _typed("job_energy_hourly", energy))
    con.register("job_gpu_daily", _typed("job_gpu_daily", daily))
    csv = tuple((HOUR0 + h * 3600, g) for h, _, g in hours if g is not None)
    register_intensity(
        con, CarbonIntensity(clusters=(ClusterIntensity(r.CLUSTER, constant, "x.csv", csv),))
    )
    [job] = queries.run_arrow(con, "marts/job_usage").to_pylist()

    highest = max([constant, *(g for _, g in csv)])
    assert job["kg_co2e"] is not None
    assert 0 <= job["kg_co2e"] <= job["energy_kwh"] * highest / 1000 * (1 + 1e-9) + 1e-12
    # hours the CSV lacks count as fallback hours (a CSV without a row: only the constant)
    lacking = sum(1 for _, _, g in hours if g is None)
    assert job["co2e_fallback_hours"] == (lacking if csv else 0)


def test_a_new_day_updates_kg_co2e_in_place_as_a_rebuild_would(tmp_path):
    day = 86400
    hours = tuple((HOUR0 + h * 3600, 100.0 + 10 * h) for h in range(0, 48))
    config = AttributionConfig(
        emissions=CarbonIntensity(clusters=(ClusterIntensity("della", 50.0, "x.csv", hours),))
    )
    root = tmp_path / "lake"
    two_hour_job(root, config.emissions)  # j1 on day 0, built whole; the state recorded
    # j2 on day 1 over two hours (hours 24 and 25 of the CSV), GPU 1, a new day of samples
    r.land(
        root,
        "gpu_samples",
        r.samples(range(day + 3000, day + 4230, 30), gpu_index=1, power_w=200.0),
        batch_id="day1",
    )
    r.land(root, "jobs", [r.job("j2", day + 3000, day + 4200, user="bob")], batch_id="day1")
    r.land(root, "job_gpus", [r.job_gpu("j2", day + 3000, day + 4200, gpu_index=1)], batch_id="b")
    con = connect(root)
    build_sample_marts(WarehouseConfig(root), config.values())
    for mart, _ in SAMPLE_MARTS:
        register_table(con, root, mart)
    update = refresh_summary_marts(con, root, config)
    assert update.mode == "incremental"  # the summary marts updated in place for the new day

    updated = connect(root)  # the marts as the update left them
    got = {row["job_id"]: row for row in r.fetch(updated, "SELECT * FROM job_usage")}
    # j2: 20 samples × 200 W × 30 s = 120 000 J in hour 24 (340 g), 120 000 J in hour 25 (350 g)
    assert got["j2"]["kg_co2e"] == pytest.approx((120_000 * 340 + 120_000 * 350) / KWH / 1000)
    assert got["j1"]["kg_co2e"] == pytest.approx((60_000 * 100 + 60_000 * 110) / KWH / 1000)
    daily = "SELECT date, user, kg_co2e FROM usage_daily ORDER BY date, user"
    before = r.fetch(updated, daily)

    rebuilt_con = connect(root)
    build_marts(rebuilt_con, root, config, force=True)  # whole, from scratch: views refreshed
    assert r.fetch(rebuilt_con, daily) == before
    rebuilt = {row["job_id"]: row for row in r.fetch(rebuilt_con, "SELECT * FROM job_usage")}
    assert {k: v["kg_co2e"] for k, v in rebuilt.items()} == pytest.approx(
        {k: v["kg_co2e"] for k, v in got.items()}
    )
