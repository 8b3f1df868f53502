"""The API's tokens file and settings: refused when others may read or change it, one clear
line for each mistake (never the token), `config check` saying so, and the proxy identity
mapping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.access import AccessPolicy, Denied, Viewer, resolve_remote_user
from app.api.settings import ApiSettings
from app.api.tokens import TokensFile, TokensFileError, load_tokens
from app.cli import cli
from app.config import ConfigError, load_config
from tests.api import lake as L


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def test_each_token_stands_for_its_user_and_role(tmp_path):
    tokens = load_tokens(L.tokens_file(tmp_path))

    assert tokens.viewer(L.ALICE) == Viewer("alice", is_manager=False)
    assert tokens.viewer(L.BOB) == Viewer("bob", is_manager=False)
    assert tokens.viewer(L.BOSS) == Viewer("boss", is_manager=True)
    assert tokens.viewer(L.ALICE + "x") is None and tokens.viewer("") is None
    assert L.ALICE not in repr(tokens)


@pytest.mark.parametrize("mode", [0o604, 0o606, 0o620, 0o644, 0o666])
def test_a_file_others_can_read_or_change_is_refused(tmp_path, mode):
    path = write(tmp_path, f"{L.ALICE} alice\n", mode)

    with pytest.raises(TokensFileError) as err:
        load_tokens(path)

    message = str(err.value)
    assert f"mode {mode:04o}" in message and "chmod 600" in message and str(path) in message
    assert L.ALICE not in message


def test_a_file_another_account_owns_is_refused(tmp_path):
    """Its owner could give itself a manager's token. Run as root, the file is given to
    `nobody`; otherwise the API is taken to run as another account than the file's owner."""
    path = write(tmp_path, f"{L.ALICE} alice\n")
    if os.geteuid() == 0:
        os.chown(path, 65534, -1)
        api = 0
    else:
        api = os.geteuid() + 1

    with pytest.raises(TokensFileError) as err:
        load_tokens(path, euid=api)

    owner = path.stat().st_uid
    assert str(err.value) == (
        f"api.tokens_file: {str(path)!r} is owned by uid {owner}, who could change its tokens; "
        f"it must be owned by the account the API runs as (uid {api}) or root: chown it"
    )
    assert load_tokens(path, euid=owner).viewer(L.ALICE)  # its own account's: accepted


def test_a_token_outside_ascii_is_refused(tmp_path):
    path = write(tmp_path, "tökenwithumlaut_xxxxxxxx alice\n")

    with pytest.raises(TokensFileError, match="line 1: the token has a character outside ASCII"):
        load_tokens(path)


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o400])
def test_a_private_or_group_readable_file_is_accepted(tmp_path, mode):
    assert load_tokens(write(tmp_path, f"{L.ALICE} alice\n", mode)).viewer(L.ALICE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{L.ALICE}\n", "line 1: expected '<token> <user> [manager]'"),
        (f"# c\n{L.ALICE} alice admin\n", "line 2: expected '<token> <user> [manager]'"),
        ("short alice\n", "line 1: the token is shorter than 16 characters"),
        (f"{L.ALICE} alice\n{L.ALICE} bob\n", "line 2: the same token is listed on an earlier"),
    ],
)
def test_a_bad_line_is_named_without_its_token(tmp_path, text, expected):
    with pytest.raises(TokensFileError) as err:
        load_tokens(write(tmp_path, text))

    assert expected in str(err.value)
    assert L.ALICE not in str(err.value) and "short" not in str(err.value).split(":")[-1]


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(TokensFileError, match="cannot read .*No such file"):
        load_tokens(tmp_path / "absent")


def test_settings_from_the_configuration_refuse_a_readable_tokens_file(tmp_path):
    path = write(tmp_path, f"{L.ALICE} alice\n", 0o644)
    config = load_config(None, environ={"GPULEDGER_API_TOKENS_FILE": str(path)})

    with pytest.raises(ConfigError, match="api.tokens_file: .* mode 0644"):
        ApiSettings.from_config(config)
    os.chmod(path, 0o600)
    settings = ApiSettings.from_config(config)
    assert settings.enabled and settings.tokens is not None


def test_without_tokens_or_a_proxy_header_nobody_can_sign_in():
    settings = ApiSettings.from_config(load_config(None, environ={}))

    assert not settings.enabled
    assert settings.trusted_proxies == {"127.0.0.1", "::1"}


def test_config_check_reports_a_readable_tokens_file(tmp_path):
    path = write(tmp_path, f"{L.ALICE} alice\n", 0o644)
    config = tmp_path / "gpuledger.toml"
    config.write_text(f'[api]\ntokens_file = "{path}"\n', encoding="utf-8")

    result = CliRunner().invoke(cli, ["config", "check", "--config", str(config)])

    assert result.exit_code == 1, result.output
    assert "mode 0644" in result.output and "Traceback" not in result.output
    assert L.ALICE not in result.output


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("trusted_user_header", '"X Remote User"', "expected an HTTP header name"),
        ("trusted_proxies", '["localhost"]', "expected IP addresses"),
        ("refresh_s", "0", "expected a number above 0"),
    ],
)
def test_a_bad_api_key_is_one_error_naming_it(tmp_path, key, value, expected):
    config = tmp_path / "gpuledger.toml"
    config.write_text(f"[api]\n{key} = {value}\n", encoding="utf-8")

    with pytest.raises(ConfigError, match=f"api.{key}: {expected}"):
        load_config(config, environ={})


POLICY = AccessPolicy(
    managers=frozenset({"boss", "chief@corp.example"}),
    allowed_domains=frozenset({"corp.example"}),
    users={"ann.lee@corp.example": "alice"},
)


@pytest.mark.parametrize(
    ("remote_user", "expected"),
    [
        ("alice", Viewer("alice", is_manager=False)),
        (" Boss ", Viewer("boss", is_manager=True)),
        ("ann.lee@corp.example", Viewer("alice", is_manager=False)),
        ("bob@corp.example", Viewer("bob", is_manager=False)),
        ("chief@corp.example", Viewer("chief", is_manager=True)),
        ("eve@evil.example", Denied("Accounts of evil.example are not accepted here.")),
        ("", Denied("The proxy named no user.")),
        ("a b", Denied("The proxy named no user.")),
    ],
)
def test_a_proxy_user_maps_as_a_sign_in(remote_user, expected):
    assert resolve_remote_user(POLICY, remote_user) == expected


def test_with_an_open_dashboard_no_proxy_user_is_a_manager():
    assert resolve_remote_user(AccessPolicy(), "boss") == Viewer("boss", is_manager=False)


def test_a_running_server_sees_tokens_added_and_revoked_without_a_restart(tmp_path):
    path = write(tmp_path, f"{L.ALICE} alice\n")
    held = TokensFile.open(path)
    assert held.viewer(L.ALICE) == Viewer("alice", is_manager=False) and held.viewer(L.BOB) is None

    write(tmp_path, f"{L.BOB} bob\n")  # Alice's token revoked, Bob's added

    assert held.viewer(L.ALICE) is None and held.viewer(L.BOB) == Viewer("bob", is_manager=False)
    assert L.BOB not in repr(held)


def test_a_tokens_file_that_becomes_unusable_lets_nobody_in_until_fixed(tmp_path, caplog):
    path = write(tmp_path, f"{L.ALICE} alice\n")
    held = TokensFile.open(path)

    os.chmod(path, 0o644)  # loosened: a revoked token must not keep working on the old list
    with pytest.raises(TokensFileError, match="mode 0644"):
        held.viewer(L.ALICE)
    path.write_text(f"{L.ALICE}\n", encoding="utf-8")  # broken line
    os.chmod(path, 0o600)
    with pytest.raises(TokensFileError, match="line 1"):
        held.viewer(L.ALICE)
    path.unlink()
    with pytest.raises(TokensFileError, match="cannot read"):
        held.viewer(L.ALICE)
    assert L.ALICE not in caplog.text

    write(tmp_path, f"{L.ALICE} alice manager\n")
    assert held.viewer(L.ALICE) == Viewer("alice", is_manager=True)
