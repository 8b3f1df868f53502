"""DESIGN §7: every key of the configuration is in the one TOML file and can be overridden from
the environment as GPULEDGER_<SECTION>_<KEY>; secrets come only from the environment or a file
readable by its owner alone."""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path

import pytest

from app.config import (
    ConfigError,
    DashboardConfig,
    Secret,
    convert_setting,
    dashboard_access_policy,
    dashboard_cost_per_gpu_hour,
    load_config,
    sections,
)

# The keys §7 names, with their environment variables.
DESIGN_KEYS = {
    "lake.root": "GPULEDGER_LAKE",
    "alerts.smtp_host": "GPULEDGER_ALERTS_SMTP_HOST",
    "alerts.smtp_port": "GPULEDGER_ALERTS_SMTP_PORT",
    "alerts.smtp_user": "GPULEDGER_ALERTS_SMTP_USER",
    "alerts.smtp_password": "GPULEDGER_ALERTS_SMTP_PASSWORD",
    "alerts.smtp_starttls": "GPULEDGER_ALERTS_SMTP_STARTTLS",
    "alerts.email_from": "GPULEDGER_ALERTS_EMAIL_FROM",
    "alerts.email_domain": "GPULEDGER_ALERTS_EMAIL_DOMAIN",
    "alerts.admin_emails": "GPULEDGER_ALERTS_ADMIN_EMAILS",
    "alerts.slack_token": "GPULEDGER_ALERTS_SLACK_TOKEN",
    "alerts.slack_api_url": "GPULEDGER_ALERTS_SLACK_API_URL",
    "alerts.slack_webhook_url": "GPULEDGER_ALERTS_SLACK_WEBHOOK_URL",
    "alerts.directory": "GPULEDGER_ALERTS_DIRECTORY",
    "alerts.idle_after_minutes": "GPULEDGER_ALERTS_IDLE_AFTER_MINUTES",
    "mail.mailer": "GPULEDGER_MAIL_MAILER",
    "mail.report_timeout_s": "GPULEDGER_MAIL_REPORT_TIMEOUT_S",
}

# Valid values (as environment text) for keys whose check accepts only some strings.
CHECKED_TEXT = {
    "alerts.min_severity": "critical",
    "alerts.smtp_tls": "implicit",
    "alerts.action": "pod-delete",
    "alerts.quiet_hours": "21:30-07:15",
    "alerts.timezone": "Europe/Berlin",
    "alerts.slack_api_url": "http://127.0.0.1:9/api/",
    "alerts.slack_webhook_url": "http://127.0.0.1:9/hooks/x",
    "alerts.workdays": "sat, sun",
    "alerts.holidays": "2026-12-25, 2027-01-01",
    "alerts.idle_detectors": "idle_job, memory_hold",
    "dashboard.allowed_domains": "corp.example, lab.corp.example",
    "dashboard.allowed_issuers": "https://login.corp.example/realms/hpc",
    "dashboard.users": "ann.lee@corp.example=alee, bo@corp.example=bob",
    "api.trusted_proxies": "10.0.0.7, ::1",
    "api.trusted_user_header": "X-Remote-User",
    "api.proxy_secret": "proxy-secret-from-env-0123",
    "alerts.email_from": "gpuledger@example.org",
}
# Keys that are valid only together with another (a password needs a user to log in with).
COMPANIONS = {
    "prometheus.password": {"GPULEDGER_PROMETHEUS_USERNAME": "scraper"},
    "alerts.smtp_password": {
        "GPULEDGER_ALERTS_SMTP_USER": "gpuledger",
        "GPULEDGER_ALERTS_SMTP_STARTTLS": "true",
    },
}


def _every_key() -> list[tuple[str, str, type, dataclasses.Field]]:  # type: ignore[type-arg]
    out = []
    for name, cls in sections().items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            out.append((name, f.name, hints[f.name], f))
    return out


def _env_value(key: str, kind: object, default: object) -> tuple[str, object]:
    """(text to set in the environment, the value the section must then hold)."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    base = args[0] if typing.get_origin(kind) in (typing.Union, type(int | None)) else kind
    if key in CHECKED_TEXT:
        text = CHECKED_TEXT[key]
        if typing.get_origin(base) is tuple:
            return text, tuple(p.strip() for p in text.split(","))
        return text, text
    if base is bool:
        return ("false", False) if default else ("true", True)
    if base is int:
        return str(int(default or 0) + 1), int(default or 0) + 1  # type: ignore[call-overload]
    if base is float:
        value = float(default or 0) + 1.5  # type: ignore[arg-type]
        return str(value), value
    if base is str:
        return "value-from-env", "value-from-env"
    if base is Path:
        return "/srv/from-env", Path("/srv/from-env")
    if base is Secret:
        return "s3cret-from-env", "s3cret-from-env"
    if typing.get_origin(base) is tuple:
        return "a@example.org, b@example.org", ("a@example.org", "b@example.org")
    raise AssertionError(f"{key}: no test value for type {kind!r}; add one to this test")


def test_every_key_design_names_exists_with_its_environment_variable():
    env_of = {f"{n}.{k}": f"GPULEDGER_{n}_{k}".upper() for n, k, _, _ in _every_key()}
    env_of["lake.root"] = "GPULEDGER_LAKE"  # the shorthand §7 gives (GPULEDGER_LAKE_ROOT too)

    assert {k: env_of.get(k) for k in DESIGN_KEYS} == DESIGN_KEYS


@pytest.mark.parametrize(
    ("section", "key", "kind", "field"),
    [pytest.param(*k, id=f"{k[0]}.{k[1]}") for k in _every_key()],
)
def test_every_key_can_be_overridden_from_the_environment(section, key, kind, field):
    env_name = f"GPULEDGER_{section}_{key}".upper()
    text, expected = _env_value(f"{section}.{key}", kind, field.default)
    assert expected != field.default  # the override must be visible

    companions = COMPANIONS.get(f"{section}.{key}", {})
    config = load_config(None, environ={env_name: text, **companions})
    value = getattr(config.values[section], key)

    assert (value.reveal() if isinstance(value, Secret) else value) == expected
    assert dict((k, s) for k, _, s in config.effective())[f"{section}.{key}"] == f"env {env_name}"


def test_smtp_port_from_the_environment_wins_over_the_file(tmp_path):
    path = tmp_path / "gpuledger.toml"
    path.write_text("[alerts]\nsmtp_port = 587\n", encoding="utf-8")

    config = load_config(path, environ={"GPULEDGER_ALERTS_SMTP_PORT": "2525"})

    assert config.values["alerts"].smtp_port == 2525


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o640])
def test_a_secret_is_never_read_from_the_config_file_whatever_its_mode(tmp_path, mode):
    path = tmp_path / "gpuledger.toml"
    path.write_text('[alerts]\nsmtp_password = "hunter2"\n', encoding="utf-8")
    os.chmod(path, mode)

    with pytest.raises(ConfigError, match="alerts.smtp_password: secrets may not be written"):
        load_config(path, environ={})


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_secret_file_others_can_read_is_refused_naming_its_mode(tmp_path, mode):
    secret = tmp_path / "smtp-password"
    secret.write_text("hunter2\n", encoding="utf-8")
    os.chmod(secret, mode)
    path = tmp_path / "gpuledger.toml"
    path.write_text(f'[alerts]\nsmtp_password_file = "{secret}"\n', encoding="utf-8")

    with pytest.raises(ConfigError, match=f"has mode {mode:04o}; expected it readable by its"):
        load_config(path, environ={})


# ---------------------------------------------------------------- the dashboard's keys


@pytest.fixture
def config_file(tmp_path, monkeypatch):
    """Write `text` as the configuration file that $GPULEDGER_CONFIG names."""
    for name in list(os.environ):
        if name.startswith("GPULEDGER_"):
            monkeypatch.delenv(name)

    def write(text: str) -> Path:
        path = tmp_path / "gpuledger.toml"
        path.write_text(text, encoding="utf-8")
        monkeypatch.setenv("GPULEDGER_CONFIG", str(path))
        return path

    return write


def test_the_dashboards_keys_are_read_from_the_config_file(config_file):
    config_file('[dashboard]\nmanagers = ["Boss", "lead@example.org"]\ncost_per_gpu_hour = 3.5\n')

    assert dashboard_access_policy().managers == {"boss", "lead@example.org"}
    assert dashboard_cost_per_gpu_hour() == 3.5


def test_the_dashboards_keys_from_the_environment_win_over_the_file(config_file, monkeypatch):
    config_file('[dashboard]\nmanagers = ["boss"]\ncost_per_gpu_hour = 3.5\n')
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGERS", "ops, other")
    monkeypatch.setenv("GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR", "0")

    assert dashboard_access_policy().managers == {"ops", "other"}
    assert dashboard_cost_per_gpu_hour() == 0.0


def test_without_configuration_the_dashboard_is_open_at_the_default_price(config_file):
    config_file("")

    assert not dashboard_access_policy().restricted
    assert dashboard_cost_per_gpu_hour() == DashboardConfig().cost_per_gpu_hour == 2.0


@pytest.mark.parametrize("raw", ["-1", "cheap"])
def test_a_bad_price_is_one_error_naming_the_key(config_file, monkeypatch, raw):
    config_file("")
    monkeypatch.setenv("GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR", raw)

    with pytest.raises(ConfigError, match="dashboard.cost_per_gpu_hour: expected"):
        dashboard_cost_per_gpu_hour()


def test_a_mistyped_dashboard_variable_is_an_error(config_file, monkeypatch):
    config_file("")
    monkeypatch.setenv("GPULEDGER_DASHBOARD_MANAGER", "boss")  # MANAGERS

    with pytest.raises(ConfigError, match="GPULEDGER_DASHBOARD_MANAGER: no such setting"):
        dashboard_access_policy()


@pytest.mark.parametrize(("raw", "expected"), [("yes", True), ("0", False), ("TRUE", True)])
def test_a_flag_from_the_environment(raw, expected):
    assert convert_setting(bool, raw, from_env=True) is expected


def test_an_empty_flag_in_the_environment_is_refused_not_false():
    # GPULEDGER_DETECT_IDLE_JOB_ENABLED='' turned the idle detector off, silently
    with pytest.raises(ValueError, match="got an empty value"):
        convert_setting(bool, "", from_env=True)
