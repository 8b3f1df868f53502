"""The configuration loader (DESIGN §7): one TOML file plus `GPULEDGER_<SECTION>_<KEY>` overrides.

This is the only code that reads gpuledger's environment and configuration file. Sections are
frozen dataclasses registered with `register_section`; every field is declared with `setting`
(default, help text, optional check), so adding a section (detector thresholds, report costs,
sources) is one class. Secrets come only from the environment or a file readable by its owner
alone (`<key>_file`), and are held as `Secret`, which never prints its value.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from app.access import AccessPolicy
from app.errors import AppError

__all__ = [
    "DASHBOARD_CURRENCY",
    "DEFAULT_COST_PER_GPU_HOUR",
    "access_policy",
    "dashboard_access_policy",
    "dashboard_cost_per_gpu_hour",
    "CONFIG_ENV",
    "Config",
    "ConfigError",
    "DashboardConfig",
    "LakeConfig",
    "Secret",
    "SettingInfo",
    "describe_settings",
    "env_name",
    "show_value",
    "lake_root",
    "load_config",
    "load_section",
    "convert_setting",
    "register_list_section",
    "register_section",
    "register_table_section",
    "sections",
    "setting",
]

CONFIG_ENV = "GPULEDGER_CONFIG"
ENV_PREFIX = "GPULEDGER_"
DEFAULT_CONFIG_NAME = "gpuledger.toml"
SECRET_FILE_SUFFIX = "_file"

S = TypeVar("S")
Check = Callable[[Any], str | None]


class ConfigError(AppError):
    """The configuration is unusable; the message names the offending key and its source."""


@dataclass(frozen=True, slots=True)
class Secret:
    """A credential. `str()`/`repr()` show `********`; only `reveal()` gives the value."""

    value: str = field(repr=False)
    source: str = ""

    def reveal(self) -> str:
        """The secret itself: pass it to the library that needs it, never to a log."""
        return self.value

    def __str__(self) -> str:
        return "********"

    def __repr__(self) -> str:
        return f"Secret(******** from {self.source})" if self.source else "Secret(********)"


def setting(default: Any, help: str, check: Check | None = None, secret: bool = False) -> Any:
    """Declare one key of a section: its default, its help line and an optional check.

    `check(value)` returns an error text (what was expected) or None. A `secret` setting may
    not be written in the TOML file: it comes from `GPULEDGER_<SECTION>_<KEY>` or from
    `<key>_file`, a file readable by its owner only.
    """
    meta = {"help": help, "check": check, "secret": secret}
    if isinstance(default, list | dict | set):
        raise TypeError("use a tuple for list settings (sections are frozen)")
    return field(default=default, metadata=meta)


# Sections by name. Modules that register further sections are listed in app/config_sections.py
# (add yours there: one import, one line), which is imported when a configuration is loaded.
_SECTIONS: dict[str, type[Any]] = {}


def register_section(name: str) -> Callable[[type[S]], type[S]]:
    """Class decorator: make a frozen dataclass the `[name]` section of the configuration."""

    def wrap(cls: type[S]) -> type[S]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"section {name!r}: {cls.__name__} is not a dataclass")
        if name in _SECTIONS and _SECTIONS[name] is not cls:
            raise ValueError(f"section {name!r} is registered twice")
        _SECTIONS[name] = cls
        return cls

    return wrap


# Sections that are arrays of tables (`[[sources]]`): name → parse(items, where) -> value. Their
# keys have no environment overrides (a list has no stable names to address).
ListParser = Callable[[list[Any], str], Any]
_LIST_SECTIONS: dict[str, ListParser] = {}


def register_list_section(name: str, parse: ListParser) -> None:
    """Make `[[name]]` (an array of tables) a section, parsed and validated by `parse`."""
    if name in _LIST_SECTIONS and _LIST_SECTIONS[name] is not parse:
        raise ValueError(f"list section {name!r} is registered twice")
    _LIST_SECTIONS[name] = parse


# Sections that are tables of tables (`[detect.idle_job]`): name → load(table, environ, where),
# whose value has `effective()` yielding (key, printable value, source) for `config check`. The
# loader reads and validates its own `GPULEDGER_<NAME>_…` variables.
TableLoader = Callable[[dict[str, Any], Mapping[str, str], str], Any]
_TABLE_SECTIONS: dict[str, TableLoader] = {}


def register_table_section(name: str, load: TableLoader) -> None:
    """Make `[name]` with nested tables a section, loaded and validated by `load`."""
    if name in _TABLE_SECTIONS and _TABLE_SECTIONS[name] is not load:
        raise ValueError(f"table section {name!r} is registered twice")
    _TABLE_SECTIONS[name] = load


def convert_setting(kind: Any, raw: Any, from_env: bool = False) -> Any:
    """Convert a TOML value (or, `from_env`, an environment string) to `kind` as sections do;
    ValueError says what was expected."""
    return _convert(kind, raw, from_env=from_env)


def sections() -> dict[str, type[Any]]:
    """The registered sections by name."""
    _import_sections()
    return dict(_SECTIONS)


def _import_sections() -> None:
    # Imported here, not at the top: every settings module imports this one.
    import app.config_sections  # noqa: F401


# ---------------------------------------------------------------- the lake section


@register_section("lake")
@dataclass(frozen=True, slots=True)
class LakeConfig:
    """Where the lake is. TOML: `lake = "/data/lake"` or `[lake] root = …`; env GPULEDGER_LAKE."""

    root: Path = setting(Path("lake"), "Lake root folder (DESIGN §3).")


# ---------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class SettingInfo:
    """One documented key: `section.key`, its environment variable, default and help."""

    key: str
    env: str
    default: Any
    help: str
    secret: bool


def describe_settings() -> list[SettingInfo]:
    """Every key of every registered section, for `config check` and the docs test."""
    _import_sections()
    out = []
    for name, cls in _SECTIONS.items():
        for f in dataclasses.fields(cls):
            out.append(
                SettingInfo(
                    key=f"{name}.{f.name}",
                    env=_env_name(name, f.name),
                    default=f.default,
                    help=f.metadata.get("help", ""),
                    secret=bool(f.metadata.get("secret")),
                )
            )
    return out


def env_name(section: str, key: str) -> str:
    """The variable that overrides `section.key`: GPULEDGER_<SECTION>_<KEY>."""
    return _env_name(section, key)


def show_value(value: Any) -> str:
    """A value as `config check` prints it (TOML-like; secrets masked)."""
    return "(unset)" if value is None else _show(value)


def _env_name(section: str, key: str) -> str:
    return f"{ENV_PREFIX}{section}_{key}".upper()


_TRUE = {"1", "true", "yes", "on"}
# (not "": an empty GPULEDGER_DETECT_IDLE_JOB_ENABLED turned the idle detector off, silently)
_FALSE = {"0", "false", "no", "off"}


def _convert(kind: Any, raw: Any, from_env: bool) -> Any:
    """Convert a TOML value (or an environment string) to `kind`; raise ValueError with why."""
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if raw is None or (from_env and raw == ""):
            return None
        return _convert(args[0], raw, from_env)
    if origin is tuple:
        (item,) = typing.get_args(kind)[:1]
        if from_env:
            raw = [p.strip() for p in str(raw).split(",") if p.strip()]
        if not isinstance(raw, list | tuple):
            raise ValueError(f"expected a list, got {raw!r}")
        return tuple(_convert(item, v, from_env) for v in raw)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if from_env and str(raw).strip().lower() in _TRUE | _FALSE:
            return str(raw).strip().lower() in _TRUE
        if from_env and not str(raw).strip():
            raise ValueError(
                "expected true or false, got an empty value (unset the variable for the default)"
            )
        raise ValueError(f"expected true or false, got {raw!r}")
    if kind is int:
        if isinstance(raw, bool):
            raise ValueError(f"expected an integer, got {raw!r}")
        if isinstance(raw, int):
            return raw
        if from_env:
            try:
                return int(str(raw).strip())
            except ValueError:
                pass
        raise ValueError(f"expected an integer, got {raw!r}")
    if kind is float:
        number: float | None = None
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            number = float(raw)
        elif from_env:
            try:
                number = float(str(raw).strip())
            except ValueError:
                pass
        if number is None:
            raise ValueError(f"expected a number, got {raw!r}")
        if not math.isfinite(number):  # TOML reads nan and inf: no threshold of ours is either
            raise ValueError(f"expected a finite number, got {raw!r}")
        return number
    if kind is str:
        if isinstance(raw, str):
            return raw
        raise ValueError(f"expected a string, got {raw!r}")
    if kind is Path:
        if isinstance(raw, str) and raw:
            return Path(raw).expanduser()
        raise ValueError(f"expected a path, got {raw!r}")
    raise TypeError(f"unsupported setting type {kind!r}")


def _read_secret_file(path: Path, key: str) -> str:
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(
            f"{key}: cannot read the secret file {str(path)!r} ({exc.strerror})"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{key}: the secret file {str(path)!r} is not a regular file")
    if info.st_mode & 0o077:
        raise ConfigError(
            f"{key}: the secret file {str(path)!r} has mode {stat.S_IMODE(info.st_mode):04o}; "
            "expected it readable by its owner only (chmod 600)"
        )
    if info.st_uid != os.getuid():
        raise ConfigError(f"{key}: the secret file {str(path)!r} is not owned by this user")
    try:
        return path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:  # (never the bytes: they are a secret)
        raise ConfigError(
            f"{key}: the secret file {str(path)!r} is not UTF-8 text; save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{key}: cannot read the secret file {str(path)!r} ({exc.strerror})"
        ) from None


# ---------------------------------------------------------------- the loaded configuration


@dataclass(frozen=True, slots=True)
class Config:
    """The effective configuration: one instance per registered section, and where each key
    came from (`default`, the file, or an environment variable)."""

    path: Path | None
    values: Mapping[str, Any]
    sources: Mapping[str, str]

    def section(self, cls: type[S]) -> S:
        """The loaded instance of a registered section class."""
        for name, registered in _SECTIONS.items():
            if registered is cls:
                value: S = self.values[name]
                return value
        raise KeyError(f"{cls.__name__} is not a registered section")

    @property
    def lake(self) -> LakeConfig:
        """The `[lake]` section."""
        return self.section(LakeConfig)

    def effective_lists(self) -> Iterator[tuple[str, list[tuple[str, str]]]]:
        """(section, [(key, printable value)]) for each entry of the `[[section]]` arrays of
        tables, in file order: its `kind` first (when it has one), then every field."""
        for name in _LIST_SECTIONS:
            for entry in self.values[name]:
                keys = [("kind", _show(entry.kind))] if hasattr(entry, "kind") else []
                for f in dataclasses.fields(entry):
                    value = getattr(entry, f.name)
                    keys.append((f.name, "(unset)" if value is None else _show(value)))
                yield name, keys

    def effective(self) -> Iterator[tuple[str, str, str]]:
        """(key, printable value, source) for every key; secrets are masked."""
        for name in _SECTIONS:
            instance = self.values[name]
            for f in dataclasses.fields(instance):
                key = f"{name}.{f.name}"
                value = getattr(instance, f.name)
                shown = "(unset)" if value is None else _show(value)
                yield key, shown, self.sources.get(key, "default")
        for name in _TABLE_SECTIONS:
            yield from self.values[name].effective()


def _show(value: Any) -> str:
    """A value as `config check` prints it: secrets masked, URLs without `user:password@`."""
    from collector.sources.http_url import redact_urls

    if isinstance(value, Secret):
        return str(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(repr(redact_urls(str(v))) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return repr(redact_urls(str(value)))
    return str(value)


def _config_path(path: Path | None, environ: Mapping[str, str]) -> Path | None:
    """The file to read: asked for (then it must exist), else ./gpuledger.toml if present."""
    if path is not None:
        return path
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV])
    default = Path(DEFAULT_CONFIG_NAME)
    if default.exists() and not default.is_file():  # (a site's settings would be ignored)
        raise ConfigError(f"{str(default.resolve())!r} is not a file; expected the config file")
    return default if default.is_file() else None


def _check_env_names(environ: Mapping[str, str]) -> None:
    """A GPULEDGER_<SECTION>_<KEY> of a registered section must name one of its keys."""
    known = {CONFIG_ENV, "GPULEDGER_LAKE"}
    prefixes = []
    for name, cls in _SECTIONS.items():
        prefixes.append(_env_name(name, ""))
        for f in dataclasses.fields(cls):
            known.add(_env_name(name, f.name))
            if f.metadata.get("secret"):
                known.add(_env_name(name, f.name + SECRET_FILE_SUFFIX))
    lists = tuple(_env_name(name, "") for name in _LIST_SECTIONS)
    for var in environ:
        if lists and var.startswith(lists):
            name = next(p for p in lists if var.startswith(p))[len(ENV_PREFIX) : -1].lower()
            raise ConfigError(
                f"{var}: [[{name}]] entries cannot be set from the environment "
                "(a list has no stable names); write them in the configuration file"
            )
        if var.startswith(tuple(prefixes)) and var not in known:
            section = next(p for p in prefixes if var.startswith(p))[len(ENV_PREFIX) : -1]
            raise ConfigError(
                f"{var}: no such setting in [{section.lower()}] (a typo?); "
                "see `gpuledger config check` for the keys"
            )
        meant = _misspelt_section(var, environ[var])
        if meant is not None:
            raise ConfigError(
                f"{var}: no section [{meant[0]}] (a typo of [{meant[1]}]?), so it sets "
                "nothing; see `gpuledger config check` for the names"
            )


def _misspelt_section(var: str, value: str) -> tuple[str, str] | None:
    """(the name written, the section meant) where `var` names a section close to one of ours
    and, read in that section, a key it has (GPULEDGER_ALERT_SMTP_PORT, GPULEDGER_ATRIBUTE_
    BUCKET_S: both set nothing, silently); None for a variable of a section of ours or of
    something else (GPULEDGER_SPOOL; GPULEDGER_SERVER_SERVICE_HOST, which Kubernetes sets for
    a Service named gpuledger-server, is close to [serve] but names no key of it)."""
    import difflib

    if not var.startswith(ENV_PREFIX) or value.startswith(("tcp://", "udp://", "sctp://")):
        return None  # (Kubernetes' link to a Service gpuledger-server: GPULEDGER_SERVER_PORT)
    names = {*_SECTIONS, *_TABLE_SECTIONS}
    if var.startswith(tuple(_env_name(n, "") for n in {*names, *_LIST_SECTIONS})):
        return None
    parts = var[len(ENV_PREFIX) :].lower().split("_")
    for name in sorted(names):
        cut = name.count("_") + 1
        written, rest = "_".join(parts[:cut]), "_".join(parts[cut:])
        close = difflib.SequenceMatcher(None, written, name).ratio() >= 0.8
        if close and rest and _names_a_key(name, rest, value):
            return written, name
    return None


def _names_a_key(section: str, key: str, value: str) -> bool:
    """Whether GPULEDGER_<SECTION>_<KEY> would set a key of `section`."""
    cls = _SECTIONS.get(section)
    if cls is not None:
        keys = {f.name for f in dataclasses.fields(cls)}
        keys |= {
            f.name + SECRET_FILE_SUFFIX for f in dataclasses.fields(cls) if f.metadata.get("secret")
        }
        return key in keys
    try:  # a table section (the pipeline's) knows its keys as it loads them
        _TABLE_SECTIONS[section]({}, {_env_name(section, key): value}, "")
    except ConfigError as exc:
        return "no such setting" not in str(exc)
    except Exception:  # any other refusal was of the value: the key is one
        return True
    return True


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r} ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise ConfigError(
            f"config file {str(path)!r} is not valid TOML: its arrays or tables are nested "
            "too deeply"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {str(path)!r} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
            "save it as UTF-8"
        ) from None


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Load `path` (else $GPULEDGER_CONFIG, else ./gpuledger.toml if present) and the overrides.

    Raises ConfigError naming the key (e.g. `alerts.smtp_port`) and where the bad value came
    from; unknown sections and keys in the file are errors, so typos do not pass silently.
    """
    _import_sections()
    env = os.environ if environ is None else environ
    _check_env_names(env)
    file_path = _config_path(path, env)
    data = _read_toml(file_path) if file_path is not None else {}
    where = f"in {file_path}" if file_path is not None else ""
    # `lake = "/x"` at the top level is the documented shorthand for [lake] root
    if isinstance(data.get("lake"), str):
        data["lake"] = {"root": data["lake"]}
    unknown = sorted(set(data) - set(_SECTIONS) - set(_LIST_SECTIONS) - set(_TABLE_SECTIONS))
    if unknown:
        known = sorted({*_SECTIONS, *_TABLE_SECTIONS})
        raise ConfigError(f"unknown section {unknown[0]!r} {where}; known: {', '.join(known)}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, cls in _SECTIONS.items():
        table = data.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{name}: expected a table ([{name}]) {where}, got {table!r}")
        values[name] = _load_section(name, cls, table, env, where, sources)
    for name, parse in _LIST_SECTIONS.items():
        items = data.get(name, [])
        if not isinstance(items, list):
            raise ConfigError(f"{name}: expected an array of tables ([[{name}]]) {where}")
        values[name] = parse(items, where)
    for name, load in _TABLE_SECTIONS.items():
        table = data.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{name}: expected a table ([{name}]) {where}, got {table!r}")
        values[name] = load(table, env, where)
    return Config(path=file_path, values=values, sources=sources)


def _load_section(
    name: str,
    cls: type[Any],
    table: dict[str, Any],
    env: Mapping[str, str],
    where: str,
    sources: dict[str, str],
) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    secret_files = {
        f"{n}{SECRET_FILE_SUFFIX}" for n, f in fields.items() if f.metadata.get("secret")
    }
    for key in table:
        if key not in fields and key not in secret_files:
            raise ConfigError(
                f"{name}.{key}: unknown key {where}; known: {', '.join(sorted(fields))}"
            )
    kwargs: dict[str, Any] = {}
    for key, f in fields.items():
        full = f"{name}.{key}"
        env_name = _env_name(name, key)
        if f.metadata.get("secret"):
            secret = _load_secret(name, key, table, env, where, sources)
            check = f.metadata.get("check")
            problem = check(secret.reveal()) if check is not None and secret is not None else None
            if problem:  # (never the value: it is a secret)
                raise ConfigError(f"{full}: {problem} ({sources[full]}; the value is not shown)")
            kwargs[key] = secret
            continue
        raw: Any = dataclasses.MISSING
        from_env = False
        if name == "lake" and key == "root" and env.get("GPULEDGER_LAKE"):
            raw, from_env, sources[full] = env["GPULEDGER_LAKE"], True, "env GPULEDGER_LAKE"
        elif env_name in env:
            raw, from_env, sources[full] = env[env_name], True, f"env {env_name}"
        elif key in table:
            raw, sources[full] = table[key], f"file {where[3:]}"
        if raw is dataclasses.MISSING:
            value = f.default
        else:
            try:
                value = _convert(hints[key], raw, from_env)
            except ValueError as exc:
                raise ConfigError(_redacted(f"{full}: {exc} ({sources[full]})")) from None
        check = f.metadata.get("check")
        problem = check(value) if check is not None and value is not None else None
        if problem:
            said = f"{full}: {problem}, got {value!r} ({sources.get(full, 'default')})"
            raise ConfigError(_redacted(said))
        kwargs[key] = value
    instance = cls(**kwargs)
    validate = getattr(instance, "validate", None)
    if validate is not None:
        problem = validate()
        if problem:  # (the values it names came from the file, the environment or defaults)
            came = sorted({v for k, v in sources.items() if k.startswith(f"{name}.")})
            raise ConfigError(_redacted(f"{name}.{problem} ({'; '.join(came) or 'defaults'})"))
    return instance


def _redacted(message: str) -> str:
    """`message` without the `user:password@` of any URL in it (a source URL with credentials
    was printed whole in the error about its type)."""
    from collector.sources.http_url import redact_urls

    return redact_urls(message)


def _load_secret(
    name: str,
    key: str,
    table: dict[str, Any],
    env: Mapping[str, str],
    where: str,
    sources: dict[str, str],
) -> Secret | None:
    full = f"{name}.{key}"
    env_name = _env_name(name, key)
    file_key = f"{key}{SECRET_FILE_SUFFIX}"
    file_env = _env_name(name, file_key)
    if key in table:
        raise ConfigError(
            f"{full}: secrets may not be written in the config file {where[3:]}; set "
            f"{env_name} or {full}{SECRET_FILE_SUFFIX} (a file readable by its owner only)"
        )
    if env.get(env_name):
        sources[full] = f"env {env_name}"
        return Secret(env[env_name], sources[full])
    file_raw = env.get(file_env) or table.get(file_key)
    if file_raw:
        if not isinstance(file_raw, str):
            raise ConfigError(f"{full}{SECRET_FILE_SUFFIX}: expected a path, got {file_raw!r}")
        path = Path(file_raw).expanduser()
        value = _read_secret_file(path, f"{full}{SECRET_FILE_SUFFIX}")
        if not value:  # (a file made to be filled in later: the secret is not set yet)
            return None
        sources[full] = f"file {path}"
        return Secret(value, sources[full])
    return None


def load_section(
    cls: type[S],
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    keys: Iterable[str] | None = None,
) -> S:
    """One registered section alone (`cls`, e.g. `LakeConfig`, `MailConfig`): the file
    `load_config` would read, read the same way (`lake = "/x"` for `[lake] root`, the
    environment's GPULEDGER_<SECTION>_<KEY> and GPULEDGER_LAKE over it), the other sections
    neither loaded nor checked.

    For a command that needs one or two sections (`--lake`'s default: `gpuledger job`, `query`,
    …; `gpuledger mail`): loading every section imports every settings module (0.17-0.23 s on
    a slow machine). `gpuledger config check` and the commands that read the other sections
    load the whole configuration and report any mistake in it.
    `keys`: read only these keys of the section, the others at their defaults (what a
    command can still use of a section whose other keys are not valid).
    Raises ConfigError for a file that cannot be read or a section that is not valid.
    """
    name = next((n for n, registered in _SECTIONS.items() if registered is cls), None)
    if name is None:
        raise ValueError(f"{cls.__name__} is not a registered configuration section")
    env = os.environ if environ is None else environ
    file_path = _config_path(path, env)
    data = _read_toml(file_path) if file_path is not None else {}
    where = f"in {file_path}" if file_path is not None else ""
    table = data.get(name, {})
    if name == "lake" and isinstance(table, str):  # the documented shorthand
        table = {"root": table}
    if not isinstance(table, dict):
        raise ConfigError(f"{name}: expected a table ([{name}]) {where}, got {table!r}")
    if keys is not None:
        wanted = set(keys)
        others = {_env_name(name, f.name) for f in dataclasses.fields(_SECTIONS[name])} - {
            _env_name(name, k) for k in wanted
        }
        table = {k: v for k, v in table.items() if k in wanted}
        env = {k: v for k, v in env.items() if k not in others}
    section: S = _load_section(name, cls, table, env, where, {})
    return section


def lake_root() -> Path:
    """The lake root: $GPULEDGER_LAKE, else the configuration's `lake`, else ./lake."""
    if os.environ.get("GPULEDGER_LAKE"):
        return Path(os.environ["GPULEDGER_LAKE"])
    return load_config().lake.root


# ---------------------------------------------------------------- the dashboard section

# What a GPU-hour costs (USD) when `dashboard.cost_per_gpu_hour` is not set.
DEFAULT_COST_PER_GPU_HOUR = 2.0
# The symbol the dashboard writes before a cost (costs are in USD, as in the weekly report).
DASHBOARD_CURRENCY = "$"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "expected a non-negative number"


# The longest time a setting may give (a year, in its unit's seconds): past it a timer
# overflows and the thread that sleeps it dies (a refresh of 1e12 s ended `serve`'s refresh
# while /healthz still answered; an SMTP timeout of inf left a message stuck in `sending`)
MAX_SECONDS = 365 * 86400.0


def positive_at_most_a_year(v: float) -> str | None:
    """A setting's check: a time (or a factor of one) above 0, at most MAX_SECONDS (a year of
    seconds; as a number of minutes or hours, a bound only against overflow)."""
    if not math.isfinite(v) or not 0 < v <= MAX_SECONDS:
        return f"expected a number above 0, at most {MAX_SECONDS:,.0f}"
    return None


def non_negative_at_most_a_year(v: float) -> str | None:
    """`positive_at_most_a_year`, 0 allowed."""
    if not math.isfinite(v) or not 0 <= v <= MAX_SECONDS:
        return f"expected a number from 0 to {MAX_SECONDS:,.0f}"
    return None


def _user_pairs(v: tuple[str, ...]) -> str | None:
    for pair in v:
        email, sep, user = pair.partition("=")
        if not sep or "@" not in email or not email.strip() or not user.strip():
            return f"expected 'e-mail=user' pairs, e.g. 'ann.lee@corp.example=alee' ({pair!r})"
    return None


def _domains(v: tuple[str, ...]) -> str | None:
    for d in v:
        if not d.strip() or "@" in d or "/" in d:
            return f"expected bare e-mail domains, e.g. 'corp.example' ({d!r})"
    return None


def _issuers(v: tuple[str, ...]) -> str | None:
    for i in v:
        if not i.strip().startswith(("https://", "http://")):
            return f"expected issuer URLs, e.g. 'https://login.corp.example' ({i!r})"
    return None


@register_section("dashboard")
@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """Who sees what on the dashboard, whose sign-in it trusts, and the price its cost
    figures start from."""

    managers: tuple[str, ...] = setting(
        (),
        "User names or e-mail addresses who see every job; none: open access (no sign-in).",
    )
    allowed_domains: tuple[str, ...] = setting(
        (),
        "E-mail domains whose people may sign in (e.g. corp.example); others are refused.",
        _domains,
    )
    allowed_issuers: tuple[str, ...] = setting(
        (),
        "OIDC issuers (the token's iss) whose sign-ins are trusted; others are refused.",
        _issuers,
    )
    users: tuple[str, ...] = setting(
        (),
        "'e-mail=user' pairs mapping a verified e-mail address to its scheduler user name.",
        _user_pairs,
    )
    user_claim: str | None = setting(
        None,
        "Claim holding the scheduler user name (e.g. preferred_username); unset: the "
        "e-mail's local part.",
    )
    cost_per_gpu_hour: float = setting(
        DEFAULT_COST_PER_GPU_HOUR,
        "Default price of one GPU-hour (USD) for the dashboard's cost figures.",
        _non_negative,
    )


def dashboard_access_policy() -> AccessPolicy:
    """Who may see what on the dashboard, from the `[dashboard]` section (env
    GPULEDGER_DASHBOARD_<KEY>, lists comma-separated): `managers` see every job; when there
    are none, access is open (no sign-in, everyone sees everything). Sign-ins are trusted per
    `allowed_domains`, `allowed_issuers`, `users` and `user_claim` (see app.access).

    Raises ConfigError naming the key when the configuration is not valid.
    """
    return access_policy(load_config().section(DashboardConfig))


def access_policy(cfg: DashboardConfig) -> AccessPolicy:
    """The access policy a `[dashboard]` section describes (names lower-cased)."""

    def clean(values: tuple[str, ...]) -> frozenset[str]:
        return frozenset(v.strip().lower() for v in values if v.strip())

    users = {}
    for pair in cfg.users:
        email, _, user = pair.partition("=")
        users[email.strip().lower()] = user.strip().lower()
    claim = cfg.user_claim.strip() if cfg.user_claim and cfg.user_claim.strip() else None
    return AccessPolicy(
        managers=clean(cfg.managers),
        allowed_domains=clean(cfg.allowed_domains),
        allowed_issuers=frozenset(i.strip() for i in cfg.allowed_issuers if i.strip()),
        users=users,
        user_claim=claim,
    )


def dashboard_cost_per_gpu_hour() -> float:
    """Price of one GPU-hour for the dashboard's cost figures: `dashboard.cost_per_gpu_hour`
    (env GPULEDGER_DASHBOARD_COST_PER_GPU_HOUR), else DEFAULT_COST_PER_GPU_HOUR.

    Raises ConfigError naming the key and the value when it is not a non-negative number.
    """
    value: float = load_config().section(DashboardConfig).cost_per_gpu_hour
    return value
