"""The docs' configuration reference and environment overrides agree with the loader
(app/config.py): each key's variable name, default and meaning, and every documented variable
really sets its key.

The reference's table is generated from the loader (app/reference_docs.py); these tests hold it
to the loader's own behaviour, so a generator that drifted (a wrong variable, default or meaning,
a key left out) fails here; the hand-written pages' variables and TOML examples are checked too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import pytest

from app.cli import cli
from app.config import ConfigError, Secret, describe_settings, load_config
from app.pipeline import default_pipeline_config
from app.pipeline.emissions import ENV_VARIABLES as EMISSIONS_VARIABLES
from app.reference_docs import config_reference
from tests.docs.pages import pages
from tests.docs.pages import where as doc_name

ROOT = Path(__file__).resolve().parents[2]
SECRET = " **Secret.**"
ROW = re.compile(r"^\| `([a-z_]+\.[a-z_]+)` \| `(GPULEDGER_[A-Z_]+)` \| (.+?) \| (.+) \|$", re.M)


def shown(default: Any) -> str:
    """A default as the reference table writes it."""
    if default is None or default == ():
        return "—"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, tuple):
        return "`" + ", ".join(default) + "`"
    return f"`{default}`"


def table() -> dict[str, tuple[str, str, str]]:
    rows = {m.group(1): m.group(2, 3, 4) for m in ROW.finditer(config_reference())}
    assert len(rows) > 40, "the configuration reference's tables were not found"
    return rows


def test_the_reference_gives_each_key_its_real_variable_default_and_meaning():
    rows = table()
    for info in describe_settings():
        assert info.key in rows, f"{info.key} is not in the configuration reference"
        env, default, meaning = rows[info.key]
        assert env == info.env, info.key
        assert default == shown(info.default), info.key
        assert meaning == info.help + (SECRET if info.secret else ""), info.key
    assert set(rows) <= {i.key for i in describe_settings()}, "the reference has unknown keys"


# Valid environment values for keys whose check accepts only some strings.
SAMPLES = {
    "dashboard.allowed_issuers": "https://login.example.org/realms/hpc",
    "dashboard.users": "ann.lee@example.org=alee",
    "api.trusted_user_header": "X-Remote-User",
    "alerts.slack_webhook_url": "https://hooks.example.org/services/T0/B0/x",
    "api.proxy_secret": "proxy-s3cret-0123456789",
    "alerts.admin_emails": "hpc-admins@example.org",
}


def env_value(default: Any, secret: bool) -> str:
    """A valid environment value for a key: its default written as text, or a sample."""
    if secret:
        return "s3cret"
    if default is None:
        return "hpc-help@example.org"
    if isinstance(default, bool):
        return "true" if not default else "false"
    if isinstance(default, tuple):
        return ",".join(default) if default else "2026-12-25"
    return str(default)


# Keys that exclude others (a bearer token or basic auth, not both): set in a second round alone.
EXCLUSIVE = {"prometheus.bearer_token"}


def test_every_documented_variable_sets_its_key():
    infos = describe_settings()
    documented = table()
    environ = {
        documented[i.key][0]: SAMPLES.get(i.key) or env_value(i.default, i.secret)
        for i in infos
        if i.key in documented and i.key not in EXCLUSIVE
    }
    cfg = load_config(None, environ=environ)
    for info in infos:
        if info.key in EXCLUSIVE:
            alone = load_config(None, environ={info.env: env_value(info.default, info.secret)})
            section, key = info.key.split(".")
            value = getattr(alone.values[section], key)
            assert isinstance(value, Secret) and value.reveal() == "s3cret", info.key
            continue
        section, key = info.key.split(".")
        value = getattr(cfg.values[section], key)
        if info.secret:
            wanted = SAMPLES.get(info.key, "s3cret")
            assert isinstance(value, Secret) and value.reveal() == wanted, info.key
        else:
            assert cfg.sources[info.key] == f"env {info.env}", info.key
    alerts = cfg.values["alerts"]
    assert alerts.workdays == ("mon", "tue", "wed", "thu", "fri")  # lists: comma-separated
    assert alerts.action_enabled is True and alerts.test_mode is True  # booleans: true/false


def test_gpuledger_lake_is_the_short_name_of_the_lake_and_wins():
    both = {"GPULEDGER_LAKE_ROOT": "/a", "GPULEDGER_LAKE": "/srv/lake"}
    cfg = load_config(None, environ=both)
    assert cfg.lake.root == Path("/srv/lake") and cfg.sources["lake.root"] == "env GPULEDGER_LAKE"


def test_the_documented_example_override():
    # docs (Configuration): "GPULEDGER_ALERTS_SMTP_PORT=2525 sets alerts.smtp_port"; lists too
    cfg = load_config(
        None,
        environ={
            "GPULEDGER_ALERTS_SMTP_PORT": "2525",
            "GPULEDGER_ALERTS_ADMIN_EMAILS": "a@example.org, b@example.org",
            "GPULEDGER_SERVICE_ALERT": "false",
        },
    )
    assert cfg.values["alerts"].smtp_port == 2525
    assert cfg.values["alerts"].admin_emails == ("a@example.org", "b@example.org")
    assert cfg.values["service"].alert is False


def test_dashboard_variables_are_the_dashboard_sections_keys():
    # GPULEDGER_DASHBOARD_* override [dashboard] keys of the one file, like every other section
    assert {i.env for i in describe_settings()} >= {
        "GPULEDGER_DASHBOARD_MANAGERS",
        "GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR",
    }
    load_config(
        None,
        environ={
            "GPULEDGER_DASHBOARD_MANAGERS": "alice",
            "GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR": "2.5",
        },
    )


def test_sources_cannot_be_set_from_the_environment_and_saying_so_beats_ignoring_it():
    with pytest.raises(ConfigError, match=r"GPULEDGER_SOURCES_URL: \[\[sources\]\] entries"):
        load_config(None, environ={"GPULEDGER_SOURCES_URL": "http://prometheus:9090"})


# Variables read outside the configuration loader, and by whom (each must be in that code).
READ_ELSEWHERE = {
    "GPULEDGER_CONFIG": "app/config.py",
    "GPULEDGER_LAKE": "app/options.py",
    "GPULEDGER_HPC_JOB_MAPPING_DIR": "deploy/slurm/prolog-dcgm-job-mapping.sh",
    "GPULEDGER_EPILOG_TRIES": "deploy/slurm/epilog-slurmctld-gpuledger.sh",
    "GPULEDGER_EPILOG_PAUSE_S": "deploy/slurm/epilog-slurmctld-gpuledger.sh",
    "GPULEDGER_SPOOL": "collector/throughput.py",
    "GPULEDGER_REQUIRE_LIVE": "tests/infra/live.py",  # the test suite's, set by `make test`
}


def test_every_variable_the_docs_name_is_read_by_the_code():
    known = set(READ_ELSEWHERE)
    for info in describe_settings():
        known.add(info.env)
        if info.secret:
            known.add(f"{info.env}_FILE")
    # the pipeline's tables: GPULEDGER_<TABLE>_<KEY>, dots as underscores (app/pipeline/settings.py)
    known |= {
        "GPULEDGER_" + key.upper().replace(".", "_")
        for key, _, _ in default_pipeline_config().effective()
    }
    known |= set(EMISSIONS_VARIABLES)  # [emissions]: the default only (app/pipeline/emissions.py)
    for name, reader in READ_ELSEWHERE.items():
        assert (
            f'"{name}"' in (ROOT / reader).read_text() or f"{name}:-" in (ROOT / reader).read_text()
        ), f"{reader} does not read {name}"
    texts = [*pages(), *sorted(p for p in (ROOT / "deploy").rglob("*") if p.is_file())]
    named = {
        (doc_name(path), var)
        for path in texts
        for var in re.findall(r"\bGPULEDGER_[A-Z0-9_]*[A-Z0-9]\b", path.read_text("utf-8"))
    }
    named |= {  # the generated page names every key's variable
        ("reference/configuration.md", var)
        for var in re.findall(r"\bGPULEDGER_[A-Z0-9_]*[A-Z0-9]\b", config_reference())
    }
    helps = [("gpuledger --help", cli)]
    while helps:  # and every command's --help
        where, command = helps.pop()
        named |= {
            (where, v) for v in re.findall(r"\bGPULEDGER_[A-Z0-9_]*[A-Z0-9]\b", command.help or "")
        }
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                sub = command.get_command(click.Context(command), name)
                helps.append((f"{where[:-7]}{name} --help", sub))
    assert len(named) > 40
    for where, var in named:
        prefix = var + "_"  # `GPULEDGER_ALERTS_*`, `GPULEDGER_<SECTION>_<KEY>` as patterns
        if var in ("GPULEDGER_SOURCES", "GPULEDGER_SERVICE_HOST"):
            continue  # named as errors: the Configuration page, the manifest's service links
        assert var in known or any(k.startswith(prefix) for k in known), f"{where}: {var}"


def docs_toml_blocks() -> list[str]:
    text = "\n".join(p.read_text("utf-8") for p in pages())
    return re.findall(r"^```toml\n(.*?)^```", text, re.M | re.S)


@pytest.mark.parametrize("index", range(len(docs_toml_blocks())))
def test_every_toml_example_in_the_docs_loads(index, tmp_path):
    text = docs_toml_blocks()[index].replace("/etc/gpuledger/", f"{tmp_path}/")
    for path in re.findall(rf'"({re.escape(str(tmp_path))}/[^"]+)"', text):
        Path(path).write_text("")  # the files it names (a secret must be the owner's alone)
        Path(path).chmod(0o600)
    (tmp_path / "gpuledger.toml").write_text(text)
    load_config(tmp_path / "gpuledger.toml", environ={})


def test_the_docs_show_their_configuration_examples():
    assert len(docs_toml_blocks()) >= 2
