"""The configuration loader: file, environment overrides, checks, secrets."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from app.alerts.settings import AlertsConfig
from app.cli import cli
from app.config import (
    ConfigError,
    LakeConfig,
    Secret,
    describe_settings,
    lake_root,
    load_config,
    load_section,
)
from app.reference_docs import config_reference
from tests.docs.pages import all_text


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_file_values_are_typed_and_env_overrides_them(tmp_path):
    cfg_file = write(
        tmp_path / "g.toml",
        'lake = "/data/lake"\n[alerts]\nsmtp_port = 587\nadmin_emails = ["a@x.org", "b@x.org"]\n'
        "smtp_starttls = true\n",
    )
    cfg = load_config(cfg_file, environ={"GPULEDGER_ALERTS_SMTP_PORT": "2525"})
    alerts = cfg.section(AlertsConfig)
    assert alerts.smtp_port == 2525
    assert alerts.admin_emails == ("a@x.org", "b@x.org")
    assert alerts.smtp_starttls is True
    assert cfg.lake.root == Path("/data/lake")
    assert cfg.sources["alerts.smtp_port"] == "env GPULEDGER_ALERTS_SMTP_PORT"
    assert cfg.sources["alerts.admin_emails"] == f"file {cfg_file}"


def test_config_file_comes_from_env_then_cwd(tmp_path, monkeypatch):
    write(tmp_path / "gpuledger.toml", "[alerts]\nsmtp_host = 'cwd-host'\n")
    other = write(tmp_path / "other.toml", "[alerts]\nsmtp_host = 'env-host'\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(environ={}).section(AlertsConfig).smtp_host == "cwd-host"
    env = {"GPULEDGER_CONFIG": str(other)}
    assert load_config(environ=env).section(AlertsConfig).smtp_host == "env-host"


def test_lake_env_wins_over_the_file(tmp_path, monkeypatch):
    cfg_file = write(tmp_path / "g.toml", "[lake]\nroot = '/from/file'\n")
    assert load_config(cfg_file, environ={}).lake.root == Path("/from/file")
    assert load_config(cfg_file, environ={"GPULEDGER_LAKE": "/env"}).lake.root == Path("/env")
    monkeypatch.setenv("GPULEDGER_LAKE", str(tmp_path / "lk"))
    assert lake_root() == tmp_path / "lk"


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ('lake = "/data/lake"\n', {}),
        ("[lake]\nroot = '/data/lake'\n[alerts]\nsmtp_port = 587\n", {}),
        ("[lake]\nroot = '/elsewhere'\n", {"GPULEDGER_LAKE": "/data/lake"}),
        ("[lake]\nroot = '/elsewhere'\n", {"GPULEDGER_LAKE_ROOT": "/data/lake"}),
        ("", {}),
    ],
    ids=["shorthand", "table", "env-lake", "env-lake-root", "default"],
)
def test_the_lake_alone_is_read_as_the_whole_configuration_reads_it(tmp_path, text, env):
    cfg_file = write(tmp_path / "g.toml", text)

    assert (
        load_section(LakeConfig, cfg_file, environ=env) == load_config(cfg_file, environ=env).lake
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lake = 5\n", "lake: expected a table ([lake])"),
        ("[lake]\nroot = '/x'\nrot = '/y'\n", "lake.rot: unknown key"),
        ("[lake\n", "is not valid TOML"),
    ],
)
def test_a_bad_lake_section_is_refused_when_read_alone(tmp_path, text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_section(LakeConfig, write(tmp_path / "g.toml", text), environ={})


def test_the_lake_alone_leaves_the_other_sections_to_the_commands_that_read_them(tmp_path):
    """`--lake`'s default reads [lake] only: a mistake in [alerts] is reported by the commands
    that load the alerts' section (and `config check`), not by `gpuledger job`."""
    cfg_file = write(tmp_path / "g.toml", "[lake]\nroot = '/data/lake'\n[alerts]\nsmtp_prot = 25\n")

    assert load_section(LakeConfig, cfg_file, environ={}).root == Path("/data/lake")
    with pytest.raises(ConfigError, match="alerts.smtp_prot: unknown key"):
        load_config(cfg_file, environ={})


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("[alerts]\nsmtp_port = 'x'\n", {}, "alerts.smtp_port: expected an integer, got 'x'"),
        ("", {"GPULEDGER_ALERTS_SMTP_PORT": "70000"}, "alerts.smtp_port: expected a port"),
        ("[alerts]\nsmtp_prot = 25\n", {}, "alerts.smtp_prot: unknown key"),
        ("[alert]\nx = 1\n", {}, "unknown section 'alert'"),
        ("[alerts]\nquiet_hours = '8-20'\n", {}, "alerts.quiet_hours: expected HH:MM-HH:MM"),
        (
            "[alerts]\nworkdays = ['Mon', 'Funday']\n",
            {},
            "alerts.workdays: expected weekday names (mon, tue, wed, thu, fri, sat, sun or "
            "monday … sunday, any case), 'Funday' is not one",
        ),
        ("[alerts]\ntimezone = 'Mars/Olympus'\n", {}, "alerts.timezone: expected an IANA"),
        ("", {"GPULEDGER_ALERTS_SMTP_STARTTLS": "maybe"}, "expected true or false, got 'maybe'"),
        ("[alerts]\nfinal_notice_minutes = 30\n", {}, "escalation must not go backwards"),
        ("[alerts\n", {}, "is not valid TOML"),
        (
            "[alerts]\nidle_detectors = ['idle_job', 'idle_gpu']\n",
            {},
            "alerts.idle_detectors: no detector named 'idle_gpu'; known: ",
        ),
    ],
)
def test_bad_values_name_the_key(tmp_path, text, env, message):
    cfg_file = write(tmp_path / "g.toml", text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(cfg_file, environ=env)


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ("[alerts]\nworkdays = ['Mon', 'TUESDAY', 'wednesday', 'Thu', 'fRi']\n", {}),
        ("", {"GPULEDGER_ALERTS_WORKDAYS": "MONDAY, Tue,wed , THURSDAY,Fri"}),
    ],
    ids=["file", "env"],
)
def test_workdays_take_short_or_full_names_in_any_case(tmp_path, text, env):
    cfg = load_config(write(tmp_path / "g.toml", text), environ=env)

    assert cfg.section(AlertsConfig).workdays == ("mon", "tue", "wed", "thu", "fri")


def test_a_config_file_that_is_not_utf8_names_the_file(tmp_path):
    cfg_file = tmp_path / "g.toml"
    cfg_file.write_bytes(b"\xff\xfe[alerts]\nsmtp_port = 25\n")  # UTF-16 from a Windows editor

    with pytest.raises(ConfigError) as info:
        load_config(cfg_file, environ={})

    assert str(cfg_file) in str(info.value)
    assert "UTF-8" in str(info.value)


def test_a_secret_in_the_file_is_refused(tmp_path):
    cfg_file = write(tmp_path / "g.toml", "[alerts]\nsmtp_password = 'pw'\n")
    with pytest.raises(ConfigError, match="secrets may not be written in the config file") as e:
        load_config(cfg_file, environ={})
    assert "'pw'" not in str(e.value)


def test_secret_from_an_owner_only_file(tmp_path):
    secret = write(tmp_path / "pw", "file-pw\n")
    os.chmod(secret, 0o600)
    cfg_file = write(
        tmp_path / "g.toml",
        f"[alerts]\nsmtp_user = 'u'\nsmtp_starttls = true\nsmtp_password_file = '{secret}'\n",
    )
    alerts = load_config(cfg_file, environ={}).section(AlertsConfig)
    assert isinstance(alerts.smtp_password, Secret)
    assert alerts.smtp_password.reveal() == "file-pw"
    assert "file-pw" not in repr(alerts) and "file-pw" not in str(alerts.smtp_password)
    os.chmod(secret, 0o640)
    with pytest.raises(ConfigError, match=r"has mode 0640; expected it readable by its owner"):
        load_config(cfg_file, environ={})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"GPULEDGER_ALERTS_SLACK_WEBHOOK_URL": "hooks.slack.com/services/T0/B0/SECRETHOOK"},
            "alerts.slack_webhook_url: expected an http(s) URL",
        ),
        (
            {"GPULEDGER_ALERTS_SMTP_PASSWORD": "Passwört-SECRETPW"},
            "alerts.smtp_password: expected ASCII characters only",
        ),
        (
            {"GPULEDGER_ALERTS_SMTP_TIMEOUT_S": "0"},
            "alerts.smtp_timeout_s: expected a number above 0",
        ),
    ],
)
def test_a_secret_or_timeout_no_delivery_could_use_is_refused_without_its_value(env, message):
    # (each passed `config check` and then failed every `alert` run: the webhook's traceback
    # printed the URL, a credential)
    with pytest.raises(ConfigError) as refused:
        load_config(None, environ=env)
    assert str(refused.value).startswith(message)
    assert "SECRET" not in str(refused.value)


def test_an_empty_secret_file_is_a_secret_not_set_yet(tmp_path):
    # the deploy recipe makes the files for the operator to fill in: an empty webhook file is
    # no webhook (it was a URL of "", which failed every alert run)
    hook = tmp_path / "webhook"
    hook.write_text("\n")
    hook.chmod(0o600)
    env = {"GPULEDGER_ALERTS_SLACK_WEBHOOK_URL_FILE": str(hook)}
    assert load_config(None, environ=env).section(AlertsConfig).slack_webhook_url is None


def test_secret_from_the_environment_wins():
    env = {"GPULEDGER_ALERTS_SLACK_TOKEN": "xoxb-env"}
    alerts = load_config(None, environ=env).section(AlertsConfig)
    assert alerts.slack_token is not None and alerts.slack_token.reveal() == "xoxb-env"


def test_every_setting_is_documented():
    infos = describe_settings()
    assert {i.key for i in infos} >= {
        "lake.root",
        "alerts.smtp_host",
        "alerts.smtp_port",
        "alerts.smtp_user",
        "alerts.smtp_password",
        "alerts.smtp_starttls",
        "alerts.email_from",
        "alerts.email_domain",
        "alerts.admin_emails",
        "alerts.slack_token",
        "alerts.slack_api_url",
        "alerts.slack_webhook_url",
        "alerts.directory",
        "alerts.idle_after_minutes",
    }
    reference = config_reference()  # the docs' configuration reference, generated from the code
    for info in infos:
        assert info.help, info.key
        assert f"| `{info.key}` | `{info.env}` |" in reference, f"{info.key} not in the reference"
    docs = all_text()  # and the hand-written pages name the keys the delivery side honours
    assert all(f"`{key}`" in docs for key in ("alerts.smtp_password", "alerts.admin_emails"))


def test_config_check_masks_secrets(tmp_path):
    cfg_file = write(
        tmp_path / "g.toml", "[alerts]\nsmtp_port = 2525\nsmtp_user = 'u'\nsmtp_starttls = true\n"
    )
    env = {
        "GPULEDGER_ALERTS_SMTP_PASSWORD": "pw-do-not-show",
        "GPULEDGER_ALERTS_SLACK_TOKEN": "xoxb-do-not-show",
    }
    result = CliRunner().invoke(cli, ["config", "check", "--config", str(cfg_file)], env=env)
    assert result.exit_code == 0, result.output
    assert "smtp_port = 2525  # file" in result.output
    assert "smtp_password = ********  # env GPULEDGER_ALERTS_SMTP_PASSWORD" in result.output
    assert "do-not-show" not in result.output


def test_config_check_fails_with_one_line(tmp_path):
    cfg_file = write(tmp_path / "g.toml", "[alerts]\nsmtp_port = -1\n")
    result = CliRunner().invoke(cli, ["config", "check", "--config", str(cfg_file)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: alerts.smtp_port:")
    assert "Traceback" not in result.output
    missing = CliRunner().invoke(cli, ["config", "check", "--config", str(tmp_path / "no.toml")])
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_a_mistyped_environment_variable_is_an_error():
    with pytest.raises(
        ConfigError, match=r"GPULEDGER_ALERTS_SMTP_PROT: no such setting in \[alerts\]"
    ):
        load_config(None, environ={"GPULEDGER_ALERTS_SMTP_PROT": "25"})
    # other GPULEDGER_ variables are not ours to judge
    load_config(None, environ={"GPULEDGER_SOMETHING_ELSE": "1", "GPULEDGER_LAKE": "/x"})


def test_config_check_takes_lake_like_every_command(tmp_path):
    result = CliRunner().invoke(cli, ["config", "check", "--lake", str(tmp_path)], env={})
    assert result.exit_code == 0, result.output
    assert f"root = '{tmp_path}'  # --lake" in result.output


WORD = st.builds(
    "{}@{}".format,
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=10),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=10),
)


@given(port=st.integers(1, 65535), admins=st.lists(WORD, max_size=5), tls=st.booleans())
def test_environment_overrides_round_trip(port, admins, tls):
    env = {
        "GPULEDGER_ALERTS_SMTP_PORT": f" {port} ",
        "GPULEDGER_ALERTS_ADMIN_EMAILS": ", ".join(admins),
        "GPULEDGER_ALERTS_SMTP_STARTTLS": "TRUE" if tls else "no",
    }
    alerts = load_config(None, environ=env).section(AlertsConfig)
    assert (alerts.smtp_port, alerts.admin_emails, alerts.smtp_starttls) == (
        port,
        tuple(admins),
        tls,
    )


@given(port=st.integers().filter(lambda p: not 1 <= p <= 65535))
def test_every_port_outside_the_range_is_refused(port):
    with pytest.raises(ConfigError, match="alerts.smtp_port: expected a port number"):
        load_config(None, environ={"GPULEDGER_ALERTS_SMTP_PORT": str(port)})


def test_idle_detectors_may_name_rules_and_models(tmp_path):
    text = "[alerts]\nidle_detectors = ['idle_job', 'memory_hold', 'early_waste_model_30m']\n"
    cfg = load_config(write(tmp_path / "g.toml", text), environ={})
    assert "early_waste_model_30m" in str(list(cfg.effective()))


PASSWORD_ENV = {"GPULEDGER_ALERTS_SMTP_USER": "u", "GPULEDGER_ALERTS_SMTP_PASSWORD": "pw-4711"}


def test_an_smtp_password_without_tls_is_refused_unless_allowed():
    with pytest.raises(ConfigError, match="smtp_tls: the SMTP password would travel unencrypted"):
        load_config(None, environ=PASSWORD_ENV)
    allowed = {**PASSWORD_ENV, "GPULEDGER_ALERTS_SMTP_ALLOW_PLAINTEXT_AUTH": "true"}
    assert load_config(None, environ=allowed).section(AlertsConfig).smtp_encryption == "none"


@pytest.mark.parametrize(
    ("env", "encryption"),
    [
        ({"GPULEDGER_ALERTS_SMTP_STARTTLS": "true"}, "starttls"),
        ({"GPULEDGER_ALERTS_SMTP_PORT": "465"}, "implicit"),
        (
            {"GPULEDGER_ALERTS_SMTP_TLS": "implicit", "GPULEDGER_ALERTS_SMTP_PORT": "2465"},
            "implicit",
        ),
        ({"GPULEDGER_ALERTS_SMTP_TLS": "starttls"}, "starttls"),
    ],
)
def test_smtp_tls_resolves_to_starttls_or_implicit(env, encryption):
    from app.alerts.smtp import SmtpSettings

    alerts = load_config(None, environ={**PASSWORD_ENV, **env}).section(AlertsConfig)
    assert alerts.smtp_encryption == encryption
    smtp = SmtpSettings.from_alerts(alerts)
    assert (smtp.starttls, smtp.implicit_tls) == (
        encryption == "starttls",
        encryption == "implicit",
    )


def test_smtp_tls_and_starttls_must_agree():
    env = {"GPULEDGER_ALERTS_SMTP_STARTTLS": "true", "GPULEDGER_ALERTS_SMTP_TLS": "none"}
    with pytest.raises(ConfigError, match="smtp_tls: 'none' contradicts smtp_starttls"):
        load_config(None, environ=env)


@pytest.mark.parametrize(
    "env",
    [
        {"GPULEDGER_ALERTS_ADMIN_EMAILS": "not an email"},
        {"GPULEDGER_ALERTS_EMAIL_FROM": "a\nBcc: x@y"},  # a header of its own
    ],
)
def test_an_address_that_is_not_one_is_refused(env):
    with pytest.raises(ConfigError, match="not an email address"):
        load_config(None, environ=env).section(AlertsConfig)
