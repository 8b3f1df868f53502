"""The `[emissions]` table (app/pipeline/emissions.py): its checks as one line naming the key,
and the intensity reaching the marts through `gpuledger attribute --config` to `gpuledger job`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from app.config import ConfigError, load_config
from app.pipeline import pipeline_config
from tests.marts import rows as r
from warehouse.emissions import CarbonIntensity, ClusterIntensity

KWH = 3_600_000.0
HOURLY = "hour_start_utc,g_per_kwh\n2024-03-01T00:00:00Z,300\n2024-03-01T01:00:00Z,500\n"


def invoke(*args: str) -> Result:
    runner = CliRunner(env={k: None for k in os.environ if k.startswith("GPULEDGER_")})
    return runner.invoke(cli, list(args))


def _config(folder: Path, text: str, csv: str | None = HOURLY) -> Path:
    if csv is not None:
        (folder / "della.csv").write_text(csv)
    path = folder / "g.toml"
    path.write_text(text)
    return path


def test_the_table_is_read_into_the_attribution_config(tmp_path):
    path = _config(
        tmp_path,
        "[emissions]\ndefault_g_per_kwh = 400\n"
        '[emissions.clusters.della]\ng_per_kwh = 380\ncsv = "della.csv"\n'
        "[emissions.clusters.other]\ng_per_kwh = 0\n",
    )
    intensity = pipeline_config(load_config(path, environ={})).attribution.emissions

    assert intensity == CarbonIntensity(
        400.0,
        (
            ClusterIntensity(
                "della",
                380.0,
                str(tmp_path / "della.csv"),
                ((1709251200, 300.0), (1709254800, 500.0)),
            ),
            ClusterIntensity("other", 0.0),
        ),
    )


def test_the_default_may_come_from_the_environment(tmp_path):
    path = _config(tmp_path, "", csv=None)
    cfg = load_config(path, environ={"GPULEDGER_EMISSIONS_DEFAULT_G_PER_KWH": "250"})

    assert pipeline_config(cfg).attribution.emissions.default_g_per_kwh == 250.0


@pytest.mark.parametrize(
    ("text", "csv", "message"),
    [
        (
            "[emissions.clusters.della]\ng_per_kwh = -3\n",
            None,
            "emissions.clusters.della.g_per_kwh: expected a number of g CO2e per kWh from 0 to "
            "100,000, got -3.0",
        ),
        (  # made every job's kg CO2e inf
            "[emissions]\ndefault_g_per_kwh = 1e308\n",
            None,
            "emissions.default_g_per_kwh: expected a number of g CO2e per kWh from 0 to 100,000",
        ),
        ("[emissions]\ndefault_g_per_kwh = 'x'\n", None, "emissions.default_g_per_kwh: expected"),
        (
            '[emissions.clusters.della]\ng_per_kwh = 1\ncsv = "missing.csv"\n',
            None,
            "emissions.clusters.della.csv: cannot read",
        ),
        (
            '[emissions.clusters.della]\ng_per_kwh = 1\ncsv = "della.csv"\n',
            "hour_start_utc,g_per_kwh\n2024-03-01T00:00:00Z,300\n2024-03-01T01:00:00Z,lots\n",
            "della.csv' line 3: expected a g_per_kwh from 0 to 100,000, got 'lots'",
        ),
        (
            '[emissions.clusters.della]\ng_per_kwh = 1\ncsv = "della.csv"\n',
            "hour_start_utc,g_per_kwh\n2024-03-01T00:30:00Z,300\n",
            "line 2: expected an hour start",
        ),
        (
            '[emissions.clusters.della]\ng_per_kwh = 1\ncsv = "della.csv"\n',
            "hour_start_utc,g_per_kwh\n2024-03-01T00:00:00Z,-1\n",
            "line 2: expected a g_per_kwh from 0 to 100,000, got '-1'",
        ),
        (
            '[emissions.clusters.della]\ng_per_kwh = 1\ncsv = "della.csv"\n',
            "hour_start_utc,g_per_kwh\n2024-03-01T00:00:00Z,1e308\n",
            "line 2: expected a g_per_kwh from 0 to 100,000, got '1e308'",
        ),
        (
            '[emissions.clusters.della]\ng_per_kwh = 1\ncsv = "della.csv"\n',
            "hour_start_utc,g_per_kwh\n2024-03-01T00:00:00Z,1\n2024-03-01T00:00:00Z,2\n",
            "line 3: the hour '2024-03-01T00:00:00Z' is given twice",
        ),
        (
            '[emissions.clusters.della]\ng_per_kwh = 1\ncsv = "della.csv"\n',
            "when,grams\n",
            "line 1: expected the header hour_start_utc,g_per_kwh",
        ),
        (
            '[emissions.clusters.della]\ncsv = "della.csv"\n',
            HOURLY,
            "emissions.clusters.della: a csv needs g_per_kwh (or [emissions] default_g_per_kwh)",
        ),
        (
            "[emissions.clusters.della]\ngrams = 1\n",
            None,
            "emissions.clusters.della.grams: unknown",
        ),
        ("[emissions]\ndefault = 1\n", None, "emissions.default: unknown key"),
    ],
)
def test_a_bad_value_is_one_error_naming_it(tmp_path, text, csv, message):
    path = _config(tmp_path, text, csv)
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert message in str(err.value)


def test_config_check_names_the_bad_csv_line_in_one_line(tmp_path):
    path = _config(
        tmp_path,
        '[emissions.clusters.della]\ng_per_kwh = 380\ncsv = "della.csv"\n',
        "hour_start_utc,g_per_kwh\n2024-03-01T00:00:00Z,300\nnot a row\n",
    )
    result = invoke("config", "check", "--config", str(path))

    assert result.exit_code == 1
    assert "Traceback" not in result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "emissions.clusters.della.csv" in error and "line 3" in error


def test_config_check_shows_the_csvs_hours(tmp_path):
    path = _config(
        tmp_path,
        '[emissions]\ndefault_g_per_kwh = 400\n[emissions.clusters.della]\ncsv = "della.csv"\n',
    )
    result = invoke("config", "check", "--config", str(path))

    assert result.exit_code == 0, result.output
    assert "default_g_per_kwh = 400.0  # file" in result.output
    assert "(2 hours, 2024-03-01T00:00Z to 2024-03-01T01:00Z)" in result.output


def test_attribute_with_the_configuration_gives_gpuledger_job_its_kg_co2e(tmp_path):
    lake = tmp_path / "lake"
    times = range(3000, 4230, 30)  # j1 over [3000, 4200): 60 000 J in hour 0, 60 000 J in hour 1
    r.land(lake, "gpu_samples", r.samples(times, engine_active=0.5, power_w=100.0))
    r.land(lake, "jobs", [r.job("j1", 3000, 4200)])
    r.land(lake, "job_gpus", [r.job_gpu("j1", 3000, 4200)])
    path = _config(
        tmp_path,
        '[emissions.clusters.della]\ng_per_kwh = 380\ncsv = "della.csv"\n',
        "hour_start_utc,g_per_kwh\n2024-03-01T01:00:00Z,500\n",  # lacks hour 0
    )
    built = invoke("attribute", "--config", str(path), "--lake", str(lake), "--quiet")
    assert built.exit_code == 0, built.output

    out = invoke("job", "j1", "--lake", str(lake)).output
    kg = (60_000 * 380 + 60_000 * 500) / KWH / 1000  # 0.01467 kg
    assert f"Emissions: {kg:.3f} kg CO2e (1 hour not in the cluster's intensity CSV" in out

    # the intensity changed: the summary marts are rebuilt with it (the samples' marts are not)
    (tmp_path / "della.csv").write_text(HOURLY)
    built = invoke("attribute", "--config", str(path), "--lake", str(lake), "--quiet")
    assert built.exit_code == 0, built.output
    out = invoke("job", "j1", "--lake", str(lake)).output
    assert f"Emissions: {(60_000 * 300 + 60_000 * 500) / KWH / 1000:.3f} kg CO2e\n" in out

    # without the configuration: unknown, never 0
    built = invoke("attribute", "--lake", str(lake), "--quiet")
    assert built.exit_code == 0, built.output
    out = invoke("job", "j1", "--lake", str(lake)).output
    assert "Emissions: unknown (no carbon intensity configured for its cluster" in out


def test_an_empty_csv_has_no_hours_and_config_check_says_so(tmp_path):
    path = _config(
        tmp_path, '[emissions.clusters.della]\ng_per_kwh = 380\ncsv = "della.csv"\n', csv=""
    )
    result = invoke("config", "check", "--config", str(path))

    assert result.exit_code == 0, result.output
    assert "(no hours)" in result.output


def test_a_spreadsheets_byte_order_mark_and_crlf_lines_are_read():
    from warehouse.emissions import parse_intensity_csv

    text = "\ufeffhour_start_utc,g_per_kwh\r\n2024-03-01T00:00:00Z,300\r\n2024-03-01 01:00,500\r\n"
    assert parse_intensity_csv(text) == ((1709251200, 300.0), (1709254800, 500.0))


@pytest.mark.parametrize(
    ("line", "said"),
    [
        # a stray quote: the field runs to the end of a year-long file, past the csv module's
        # field limit (a traceback, `_csv.Error: field larger than field limit`)
        ('"2024-03-01T10:00:00Z,300', "line 12: not CSV"),
        # hours no calendar arithmetic can hold (`ValueError: year 0 is out of range`)
        ("0001-01-01T00:00:00+01:00,300", "outside the years 1970–9998"),
        ("9999-12-31T23:00:00-05:00,300", "outside the years 1970–9998"),
    ],
)
def test_a_csv_no_reader_can_take_is_one_error_line(tmp_path, line, said):
    import datetime as dt

    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    rows = [f"{start + dt.timedelta(hours=k):%Y-%m-%dT%H:%M:%SZ},300" for k in range(8784)]
    rows[10] = line
    path = _config(
        tmp_path,
        '[emissions.clusters.della]\ng_per_kwh = 380\ncsv = "della.csv"\n',
        "hour_start_utc,g_per_kwh\n" + "\n".join(rows) + "\n",
    )
    result = invoke("config", "check", "--config", str(path))

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert said in error
