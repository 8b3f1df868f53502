"""The pipeline's configuration, built in one place: defaults, the file, the environment, flags.

This module is the only code under app/ that constructs the default configuration objects of a
pipeline round (`AttributionConfig`, `RuleConfig`, `RecommendConfig`); everything else receives a
frozen `PipelineConfig` from `pipeline_config()` (tests/app/test_pipeline_config.py checks it).

The configuration file's tables (each key may be overridden by `GPULEDGER_<TABLE>_<KEY>`, the
table's dots written as underscores, e.g. GPULEDGER_DETECT_IDLE_JOB_IDLE_MINUTES):

    [attribute]                 idle_below, bucket_s, hw_event_grace_s, low_efficiency_below
    [detect.<detector>]         enabled, the scope keys, the thresholds of its rule family
    [recommend]                 lookback_days
    [recommend.<kind>]          enabled, the scope keys, the recommender's thresholds
    [emissions]                 default_g_per_kwh, [emissions.clusters.<name>] g_per_kwh, csv
                                (app/pipeline/emissions.py; into AttributionConfig.emissions)

The scope keys follow Job Defense Shield: `partitions` (only these), `exclude_partitions`,
`exclude_accounts`, `exclude_users`, `exclude_qos`. A threshold set in `[detect.idle_job]`
applies to idle_job only, even where its rule family also raises other detectors.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.config import (
    MAX_SECONDS,
    ConfigError,
    convert_setting,
    env_name,
    register_table_section,
    show_value,
)
from app.pipeline.emissions import EmissionsSettings
from detectors import names
from detectors.recommend import KIND_FIELDS, RecommendConfig
from detectors.rules import DETECTOR_FAMILY, DETECTORS, FAMILIES, RuleConfig, rule_config_from
from warehouse.attribution_config import AttributionConfig

__all__ = [
    "DEFAULT_ATTRIBUTION",
    "DEFAULT_RECOMMEND",
    "DEFAULT_RULES",
    "DETECTOR_NAMES",
    "SCOPE_KEYS",
    "AttributeSettings",
    "DetectSettings",
    "DetectorSettings",
    "PipelineConfig",
    "RecommendSettings",
    "RecommenderSettings",
    "Scope",
    "default_pipeline_config",
    "defaults_toml",
    "pipeline_config",
]

# ---------------------------------------------------------------- the built-in defaults

DEFAULT_ATTRIBUTION = AttributionConfig()
DEFAULT_RULES = RuleConfig()
DEFAULT_RECOMMEND = RecommendConfig()

# Detectors that may be switched off or scoped: every rule's, and the bottleneck producer's
# (which has no thresholds here).
BOTTLENECK = names.BOTTLENECK
DETECTOR_NAMES: tuple[str, ...] = (*DETECTORS, BOTTLENECK)

SCOPE_KEYS: tuple[str, ...] = (
    "partitions",
    "exclude_partitions",
    "exclude_accounts",
    "exclude_users",
    "exclude_qos",
)
_SCOPE_HELP = {
    "partitions": "Only findings about jobs in these partitions (empty: every partition).",
    "exclude_partitions": "No findings about jobs in these partitions.",
    "exclude_accounts": "No findings about these accounts (or their jobs).",
    "exclude_users": "No findings about these users (or their jobs).",
    "exclude_qos": "No findings about jobs of these QOS.",
}


@dataclass(frozen=True, slots=True)
class Scope:
    """Which findings a detector (or recommendations a recommender) may raise, by the job's or
    the subject's partition, account, user and QOS (Job Defense Shield's scoping)."""

    partitions: tuple[str, ...] = ()
    exclude_partitions: tuple[str, ...] = ()
    exclude_accounts: tuple[str, ...] = ()
    exclude_users: tuple[str, ...] = ()
    exclude_qos: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        """True when nothing is scoped out."""
        return not any(getattr(self, k) for k in SCOPE_KEYS)


@dataclass(frozen=True, slots=True)
class DetectorSettings:
    """One detector's switch, its rule family's thresholds (None: it has none) and its scope."""

    name: str
    enabled: bool = True
    thresholds: Any = None
    scope: Scope = field(default_factory=Scope)

    @property
    def family(self) -> str | None:
        """The RuleConfig field its thresholds fill (None for detectors without thresholds)."""
        return DETECTOR_FAMILY.get(self.name)


@dataclass(frozen=True, slots=True)
class RecommenderSettings:
    """One recommender's switch and scope (its thresholds are in PipelineConfig.recommend)."""

    kind: str
    enabled: bool = True
    scope: Scope = field(default_factory=Scope)


# ---------------------------------------------------------------- reading one table


def _kind_name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


def _check(key: str, name: str, value: Any) -> str | None:
    """What is wrong with a threshold's value (its sign, its range), or None."""
    if isinstance(value, Mapping):  # names to numbers: fair-share raw shares, 0 or more
        for item, number in value.items():
            if not math.isfinite(number) or number < 0:
                return f"expected non-negative numbers ({item} = {number!r})"
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):  # nan passed every comparison below: false idle findings
        return "expected a finite number"
    if value < 0:
        return "expected a non-negative number"
    if value > MAX_SECONDS:  # no threshold of ours is this large; past it timers overflow
        return f"expected at most {MAX_SECONDS:,.0f}"
    if name.endswith("_days") and value > 3660:  # (a date that far back overflows)
        return "expected at most 3,660 days (ten years)"
    if name == "lookback_days" and value == 0:  # (it replayed nothing: no recommendation)
        return "expected more than 0 days"
    if ("frac" in name or "share" in name or name in {"quantile"}) and value > 1:
        return "expected a share between 0 and 1"
    if name.endswith("_pct") and value > 100:
        return "expected a percentage between 0 and 100"
    return None


def _convert(key: str, hint: Any, raw: Any, from_env: bool, source: str) -> Any:
    """Convert a file or environment value to a threshold's type; ConfigError names the key."""
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    try:
        if origin in (Mapping, dict) or (args and typing.get_origin(args[0]) is Mapping):
            if raw is None:
                return None
            if from_env or not isinstance(raw, dict):
                raise ValueError(f"expected a table of names to numbers, got {raw!r}")
            return {str(k): convert_setting(float, v) for k, v in raw.items()}
        if origin is tuple and typing.get_origin(typing.get_args(hint)[0]) is tuple:
            if from_env or not isinstance(raw, list):
                raise ValueError(f"expected a list of [warn, cancel] pairs, got {raw!r}")
            pairs = []
            for pair in raw:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ValueError(f"expected [warn, cancel] pairs, got {pair!r}")
                warn, cancel = (convert_setting(int, v) for v in pair)
                if not 0 < warn < cancel:
                    raise ValueError(f"expected 0 < warn < cancel minutes, got {pair!r}")
                pairs.append((warn, cancel))
            return tuple(pairs)
        return convert_setting(hint, raw, from_env)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc} ({source})") from None


def _read(
    table_name: str,
    kinds: Mapping[str, Any],
    table: Mapping[str, Any],
    env: Mapping[str, str],
    where: str,
    sources: dict[str, str],
) -> dict[str, Any]:
    """The keys of `[table_name]` that the file or the environment set, converted and checked.

    `kinds` maps each known key to its type; an unknown key is an error naming it.
    """
    for key in table:
        if key not in kinds:
            raise ConfigError(
                f"{table_name}.{key}: unknown key {where}; known: {', '.join(sorted(kinds))}"
            )
    given: dict[str, Any] = {}
    for key, hint in kinds.items():
        full = f"{table_name}.{key}"
        var = env_name(table_name.replace(".", "_"), key)
        if var in env:
            raw, from_env, source = env[var], True, f"env {var}"
        elif key in table:
            raw, from_env, source = table[key], False, f"file {where[3:]}"
        else:
            continue
        value = _convert(full, hint, raw, from_env, source)
        problem = _check(full, key, value)
        if problem:
            raise ConfigError(f"{full}: {problem}, got {value!r} ({source})")
        given[key] = value
        sources[full] = source
    return given


def _known_vars(table_name: str, kinds: Mapping[str, Any]) -> set[str]:
    return {env_name(table_name.replace(".", "_"), key) for key in kinds}


def _refuse_unknown_vars(name: str, known: set[str], env: Mapping[str, str]) -> None:
    prefix = env_name(name, "")
    for var in env:
        if var.startswith(prefix) and var not in known:
            raise ConfigError(
                f"{var}: no such setting in [{name}] (a typo?); "
                "see `gpuledger config check` for the keys"
            )


def _subtables(name: str, table: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for key, value in table.items():
        if key not in known:
            what = "detector" if name == "detect" else "recommender"
            raise ConfigError(
                f"{name}.{key}: no such {what} {where}; known: {', '.join(sorted(known))}"
            )
        if not isinstance(value, dict):
            raise ConfigError(f"{name}.{key}: expected a table ([{name}.{key}]) {where}")


def _hints(cls: type) -> dict[str, Any]:
    """The type of each field of `cls` read from the configuration (a copy: callers may add)."""
    return dict(_field_hints(cls))


@functools.cache  # resolving the string annotations costs ~0.4 ms a class, at every config load
def _field_hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in _OWN_TABLE}


# AttributionConfig fields filled from a table of their own, not keys of [attribute]
_OWN_TABLE = frozenset({"emissions"})


_SWITCH_AND_SCOPE: dict[str, Any] = {"enabled": bool, **dict.fromkeys(SCOPE_KEYS, tuple[str, ...])}


def _show(value: Any) -> str:
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        return "[" + ", ".join(f"[{a}, {b}]" for a, b in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {v:g}" for k, v in value.items()) + " }"
    if isinstance(value, float):
        return repr(value)
    return show_value(value)


def _rows(
    table_name: str, instance: Any, sources: Mapping[str, str]
) -> Iterator[tuple[str, str, str]]:
    for f in dataclasses.fields(instance):
        if f.name in _OWN_TABLE:
            continue
        key = f"{table_name}.{f.name}"
        yield key, _show(getattr(instance, f.name)), sources.get(key, "default")


# ---------------------------------------------------------------- [attribute]


@dataclass(frozen=True, slots=True)
class AttributeSettings:
    """The `[attribute]` table: how samples become marts (warehouse.attribution)."""

    config: AttributionConfig
    sources: Mapping[str, str] = field(default_factory=dict)

    def effective(self) -> Iterator[tuple[str, str, str]]:
        """(key, printable value, source) of every key."""
        yield from _rows("attribute", self.config, self.sources)


def _check_attribution(config: AttributionConfig, sources: Mapping[str, str]) -> None:
    if not 0 <= config.idle_below <= 1:
        source = sources.get("attribute.idle_below", "default")
        raise ConfigError(
            f"attribute.idle_below: expected a share between 0 and 1, got {config.idle_below!r} "
            f"({source})"
        )
    if config.bucket_s <= 0 or 86400 % config.bucket_s:
        source = sources.get("attribute.bucket_s", "default")
        raise ConfigError(
            f"attribute.bucket_s: expected seconds that divide a day, got {config.bucket_s!r} "
            f"({source})"
        )


def load_attribute(table: dict[str, Any], env: Mapping[str, str], where: str) -> AttributeSettings:
    """Load `[attribute]` over DEFAULT_ATTRIBUTION."""
    kinds = _hints(AttributionConfig)
    _refuse_unknown_vars("attribute", _known_vars("attribute", kinds), env)
    sources: dict[str, str] = {}
    given = _read("attribute", kinds, table, env, where, sources)
    config = replace(DEFAULT_ATTRIBUTION, **given)
    _check_attribution(config, sources)
    return AttributeSettings(config, sources)


# ---------------------------------------------------------------- [detect.<detector>]


@dataclass(frozen=True, slots=True)
class DetectSettings:
    """The `[detect.<detector>]` tables: every detector's switch, thresholds and scope."""

    detectors: tuple[DetectorSettings, ...]
    sources: Mapping[str, str] = field(default_factory=dict)

    def effective(self) -> Iterator[tuple[str, str, str]]:
        """(key, printable value, source) of every key of every detector."""
        for d in self.detectors:
            name = f"detect.{d.name}"
            key = f"{name}.enabled"
            yield key, _show(d.enabled), self.sources.get(key, "default")
            yield from _rows(name, d.scope, self.sources)
            if d.thresholds is not None:
                yield from _rows(name, d.thresholds, self.sources)


def _detector_kinds(name: str) -> dict[str, Any]:
    family = DETECTOR_FAMILY.get(name)
    thresholds = _hints(FAMILIES[family]) if family else {}
    return {**_SWITCH_AND_SCOPE, **thresholds}


def load_detect(table: dict[str, Any], env: Mapping[str, str], where: str) -> DetectSettings:
    """Load every `[detect.<detector>]` table over the defaults."""
    _subtables("detect", table, DETECTOR_NAMES, where)
    known: set[str] = set()
    for name in DETECTOR_NAMES:
        known |= _known_vars(f"detect.{name}", _detector_kinds(name))
    _refuse_unknown_vars("detect", known, env)
    sources: dict[str, str] = {}
    detectors = []
    for name in DETECTOR_NAMES:
        given = _read(
            f"detect.{name}", _detector_kinds(name), table.get(name, {}), env, where, sources
        )
        enabled = given.pop("enabled", True)
        scope = Scope(**{k: given.pop(k) for k in SCOPE_KEYS if k in given})
        family = DETECTOR_FAMILY.get(name)
        thresholds = None
        if family is not None:
            # the family's validation, then its dataclass with these values over the defaults
            thresholds = getattr(rule_config_from({family: given}), family)
        detectors.append(DetectorSettings(name, enabled, thresholds, scope))
    return DetectSettings(tuple(detectors), sources)


# ---------------------------------------------------------------- [recommend.<kind>]


@dataclass(frozen=True, slots=True)
class RecommendSettings:
    """`[recommend]` (lookback_days) and the `[recommend.<kind>]` tables."""

    config: RecommendConfig
    recommenders: tuple[RecommenderSettings, ...]
    sources: Mapping[str, str] = field(default_factory=dict)

    def effective(self) -> Iterator[tuple[str, str, str]]:
        """(key, printable value, source) of every key of every recommender."""
        key = "recommend.lookback_days"
        yield key, _show(self.config.lookback_days), self.sources.get(key, "default")
        for r in self.recommenders:
            name = f"recommend.{r.kind}"
            yield (
                f"{name}.enabled",
                _show(r.enabled),
                self.sources.get(f"{name}.enabled", "default"),
            )
            yield from _rows(name, r.scope, self.sources)
            yield from _rows(name, getattr(self.config, KIND_FIELDS[r.kind]), self.sources)


def _recommender_kinds(kind: str) -> dict[str, Any]:
    part = getattr(DEFAULT_RECOMMEND, KIND_FIELDS[kind])
    return {**_SWITCH_AND_SCOPE, **_hints(type(part))}


def load_recommend(table: dict[str, Any], env: Mapping[str, str], where: str) -> RecommendSettings:
    """Load `[recommend]` and every `[recommend.<kind>]` table over the defaults."""
    top = {"lookback_days": float}
    kinds = tuple(KIND_FIELDS)
    _subtables("recommend", {k: v for k, v in table.items() if k not in top}, kinds, where)
    known = _known_vars("recommend", top)
    for kind in kinds:
        known |= _known_vars(f"recommend.{kind}", _recommender_kinds(kind))
    _refuse_unknown_vars("recommend", known, env)
    sources: dict[str, str] = {}
    plain = {k: v for k, v in table.items() if k in top}
    config = replace(DEFAULT_RECOMMEND, **_read("recommend", top, plain, env, where, sources))
    recommenders = []
    for kind in kinds:
        given = _read(
            f"recommend.{kind}", _recommender_kinds(kind), table.get(kind, {}), env, where, sources
        )
        enabled = given.pop("enabled", True)
        scope = Scope(**{k: given.pop(k) for k in SCOPE_KEYS if k in given})
        part = KIND_FIELDS[kind]
        config = replace(config, **{part: replace(getattr(config, part), **given)})
        recommenders.append(RecommenderSettings(kind, enabled, scope))
    return RecommendSettings(config, tuple(recommenders), sources)


register_table_section("attribute", load_attribute)
register_table_section("detect", load_detect)
register_table_section("recommend", load_recommend)


# ---------------------------------------------------------------- the pipeline's configuration


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Everything a pipeline round (compact → attribute → detect → recommend → alert) reads.

    Built only by `pipeline_config` (or `default_pipeline_config`); frozen.
    """

    attribute: AttributeSettings
    detect: DetectSettings
    recommend: RecommendSettings

    @property
    def attribution(self) -> AttributionConfig:
        """The attribution thresholds (`[attribute]`)."""
        return self.attribute.config

    @property
    def recommend_config(self) -> RecommendConfig:
        """Every recommender's thresholds and the replayed window (`[recommend…]`)."""
        return self.recommend.config

    def detector(self, name: str) -> DetectorSettings:
        """The settings of one detector (a disabled-nothing default for unknown names)."""
        for d in self.detect.detectors:
            if d.name == name:
                return d
        return DetectorSettings(name)

    def rule_config(self, name: str) -> RuleConfig:
        """The RuleConfig detector `name` runs with: the defaults, its family's thresholds
        replaced by those of its `[detect.<name>]` table."""
        d = self.detector(name)
        if d.family is None or d.thresholds is None:
            return DEFAULT_RULES
        return replace(DEFAULT_RULES, **{d.family: d.thresholds})

    @property
    def enabled_kinds(self) -> tuple[str, ...]:
        """The recommenders that run."""
        return tuple(r.kind for r in self.recommend.recommenders if r.enabled)

    def effective(self) -> Iterator[tuple[str, str, str]]:
        """(key, printable value, source) of every pipeline key."""
        yield from self.attribute.effective()
        yield from self.detect.effective()
        yield from self.recommend.effective()

    @property
    def fingerprint(self) -> str:
        """A short id of what decides the findings (the `[attribute]` and `[detect…]` values):
        stored in every finding's evidence as `config.id`."""
        text = "\n".join(
            f"{key}={shown}"
            for key, shown, _ in (*self.attribute.effective(), *self.detect.effective())
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def evidence(self, name: str) -> str:
        """The `config` object stamped into a finding's evidence: the configuration's id and
        the detector's effective thresholds (JSON)."""
        d = self.detector(name)
        stamp: dict[str, Any] = {"id": self.fingerprint}
        if d.thresholds is not None:
            stamp["thresholds"] = dataclasses.asdict(d.thresholds)
        return json.dumps(stamp, separators=(",", ":"), sort_keys=True)


def pipeline_config(
    cfg: Any = None,
    *,
    idle_below: float | None = None,
    bucket_s: int | None = None,
) -> PipelineConfig:
    """The pipeline's configuration from a loaded `app.config.Config` (None: the built-in
    defaults), with the command-line flags (None: not given) over it."""
    if cfg is None:
        return default_pipeline_config(idle_below=idle_below, bucket_s=bucket_s)
    attribute: AttributeSettings = cfg.values["attribute"]
    flags: dict[str, Any] = {
        k: v for k, v in (("idle_below", idle_below), ("bucket_s", bucket_s)) if v is not None
    }
    if flags:
        sources = dict(attribute.sources)
        for key in flags:
            sources[f"attribute.{key}"] = f"flag --{key.removesuffix('_s').replace('_', '-')}"
        attribute = AttributeSettings(replace(attribute.config, **flags), sources)
        _check_attribution(attribute.config, sources)
    recommend: RecommendSettings = cfg.values["recommend"]
    # the idle-cancel replay reads the gpu_job_buckets mart: its bucket follows the mart's
    # unless [recommend.idle_cancel_policy] bucket_s is set
    key = "recommend.idle_cancel_policy.bucket_s"
    bucket = attribute.config.bucket_s
    if key not in recommend.sources and recommend.config.idle_cancel.bucket_s != bucket:
        idle_cancel = replace(recommend.config.idle_cancel, bucket_s=bucket)
        recommend = RecommendSettings(
            replace(recommend.config, idle_cancel=idle_cancel),
            recommend.recommenders,
            {**recommend.sources, key: "attribute.bucket_s"},
        )
    emissions: EmissionsSettings | None = cfg.values.get("emissions")
    if emissions is not None and emissions.intensity != attribute.config.emissions:
        # the carbon intensity travels with the attribution config (the summary marts read it)
        config = replace(attribute.config, emissions=emissions.intensity)
        attribute = AttributeSettings(config, attribute.sources)
    return PipelineConfig(attribute, cfg.values["detect"], recommend)


def default_pipeline_config(
    *, idle_below: float | None = None, bucket_s: int | None = None
) -> PipelineConfig:
    """The built-in defaults (no file, no environment), with any flags given."""
    cfg = _Defaults(
        {
            "attribute": load_attribute({}, {}, ""),
            "detect": load_detect({}, {}, ""),
            "recommend": load_recommend({}, {}, ""),
        }
    )
    return pipeline_config(cfg, idle_below=idle_below, bucket_s=bucket_s)


@dataclass(frozen=True, slots=True)
class _Defaults:
    values: Mapping[str, Any]


# ---------------------------------------------------------------- the defaults as TOML


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return repr(value)


def _attribute_fields() -> list[dataclasses.Field[Any]]:
    """The keys of [attribute]: AttributionConfig's fields but those of their own table."""
    return [f for f in dataclasses.fields(DEFAULT_ATTRIBUTION) if f.name not in _OWN_TABLE]


def defaults_toml() -> str:
    """Every pipeline key with its built-in default, as commented-out TOML (the generated part
    of deploy/gpuledger.example.toml; tests/app/test_pipeline_config.py keeps them equal)."""
    lines = ["[attribute]", "# how samples become marts (DESIGN §4; flags --idle-below, --bucket)"]
    for f in _attribute_fields():
        lines.append(f"# {f.name} = {_toml(f.default)}")
    for name in DETECTOR_NAMES:
        family = DETECTOR_FAMILY.get(name)
        what = f"the `{family}` thresholds (docs/detectors.md)" if family else "no thresholds"
        lines += ["", f"[detect.{name}]", f"# {name}: on or off, its scope, {what}"]
        lines.append("# enabled = true")
        if family is not None:
            for f in dataclasses.fields(FAMILIES[family]):
                lines.append(f"# {f.name} = {_toml(f.default)}")
    lines += ["", "[recommend]", "# the history replayed, in days before the end of the data"]
    lines.append(f"# lookback_days = {_toml(DEFAULT_RECOMMEND.lookback_days)}")
    for kind in KIND_FIELDS:
        part = getattr(DEFAULT_RECOMMEND, KIND_FIELDS[kind])
        doc = (type(part).__doc__ or "").strip().splitlines()[0]
        lines += ["", f"[recommend.{kind}]", f"# {kind}: {doc}", "# enabled = true"]
        for f in dataclasses.fields(part):
            value = getattr(part, f.name)
            if value is None:
                lines.append(f"# ({f.name}: unset by default)")
            else:
                lines.append(f"# {f.name} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def reference_markdown() -> str:
    """The configuration reference of every pipeline key (table, key, default, meaning), as
    Markdown: the docs site's generated page reference/pipeline.md (`app.reference_docs`)."""
    rows = ["| table | key | default | meaning |", "|---|---|---|---|"]

    def row(table: str, key: str, value: Any, meaning: str) -> None:
        shown = "—" if value is None or value == () else f"`{_toml(value)}`"
        cell = table if table.startswith("`") else f"`[{table}]`"
        rows.append(f"| {cell} | `{key}` | {shown} | {meaning} |")

    meanings = {
        "idle_below": "A sample is idle when its busy fraction is below this (`--idle-below`).",
        "bucket_s": "Occupancy bucket width in seconds; must divide a day (`--bucket`).",
        "hw_event_grace_s": "A hardware event up to this many seconds after a job's end still "
        "counts against it (job_outcomes).",
        "low_efficiency_below": "A job whose mean busy fraction is below this is low-efficiency "
        "(fairness_weekly).",
    }
    for f in _attribute_fields():
        row("attribute", f.name, f.default, meanings[f.name])
    row("detect.<detector>", "enabled", True, "Off: the detector raises no finding.")
    for key in SCOPE_KEYS:
        row("detect.<detector>", key, (), _SCOPE_HELP[key])
    for family, thresholds in FAMILIES.items():
        names = ", ".join(f"`[detect.{n}]`" for n, fam in DETECTOR_FAMILY.items() if fam == family)
        for f in dataclasses.fields(thresholds):
            row(names, f.name, f.default, f.metadata.get("doc", ""))
    row("recommend", "lookback_days", DEFAULT_RECOMMEND.lookback_days, "Days of history replayed.")
    row("recommend.<kind>", "enabled", True, "Off: the recommender proposes nothing.")
    for key in SCOPE_KEYS:
        meaning = _SCOPE_HELP[key].replace("findings", "recommendations")
        row("recommend.<kind>", key, (), f"{meaning} (by the recommendation's scope).")
    for kind in KIND_FIELDS:
        part = getattr(DEFAULT_RECOMMEND, KIND_FIELDS[kind])
        doc = (type(part).__doc__ or "").strip().splitlines()[0]
        for f in dataclasses.fields(part):
            row(f"recommend.{kind}", f.name, getattr(part, f.name), doc)
    row(
        "emissions",
        "default_g_per_kwh",
        None,
        "g CO2e per kWh of every cluster not listed (`GPULEDGER_EMISSIONS_DEFAULT_G_PER_KWH`); "
        "unset: kg_co2e unknown (null) there.",
    )
    row("emissions.clusters.<name>", "g_per_kwh", None, "The cluster's g CO2e per kWh.")
    row(
        "emissions.clusters.<name>",
        "csv",
        None,
        "Hourly values: a CSV `hour_start_utc,g_per_kwh`, relative to the configuration file; "
        "the hours it lacks count at `g_per_kwh` (else the default).",
    )
    return "\n".join(rows) + "\n"
