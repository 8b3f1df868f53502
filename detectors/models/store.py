"""The model store: each trained model as `<lake>/_state/models/<name>.joblib` plus a JSON card.

The card says what the model is (name, features), what it learnt from (training window,
clusters, rows) and how it scored on its time-split test, so an operator can judge it without
loading it. Loading checks the card's feature list against what the caller will feed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from warehouse import layout
from warehouse.errors import DamagedFile
from warehouse.lake import Lake

__all__ = [
    "ModelCard",
    "ModelNotTrained",
    "NotEnoughHistory",
    "load",
    "model_dir",
    "now_iso",
    "save",
]

MODELS_DIR = "models"
MODELS_LOCK = "models"  # `_state/locks/models.lock`: a model and its card saved and read together


class ModelNotTrained(LookupError):
    """The lake's model store has no model of that name (or its card does not match)."""


class NotEnoughHistory(ValueError):
    """The training data cannot teach a model (e.g. no failure, or only wasteful jobs)."""


@dataclass(frozen=True, slots=True)
class ModelCard:
    """What a stored model is, what it learnt from, and how it scored (JSON next to it)."""

    name: str
    features: tuple[str, ...]
    trained_ts: str
    window_start: str | None
    window_end: str | None
    clusters: tuple[str, ...]
    rows: int
    threshold: float | None
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelCard:
        """The card in `text`; ValueError naming the field where one has the wrong type (a
        hand-edited `"threshold": "0.5"` would fail later, deep inside a model's scoring)."""
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("a model card is a JSON object")
        for key in ("features", "clusters"):
            values = raw.get(key)
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ValueError(f"{key!r} must be a list of strings")
            raw[key] = tuple(values)
        for key, kinds, optional in _CARD_FIELDS:
            value = raw.get(key)
            wrong = isinstance(value, bool) or not isinstance(value, kinds)
            if wrong and not (optional and value is None):
                raise ValueError(f"{key!r} must be {kinds[0].__name__}, not {value!r}")
        numbers = raw.get("metrics", {})
        if not isinstance(numbers, dict) or any(
            v is not None and (isinstance(v, bool) or not isinstance(v, int | float))
            for v in numbers.values()
        ):
            raise ValueError("'metrics' must map names to numbers")
        if not isinstance(raw.get("params", {}), dict):
            raise ValueError("'params' must be an object")
        for key in ("trained_ts", "window_start", "window_end"):
            if raw.get(key) is not None:
                try:  # (read when the model predicts: a bad one was a traceback there)
                    dt.datetime.fromisoformat(raw[key])
                except ValueError:
                    raise ValueError(f"{key!r} must be an ISO time, not {raw[key]!r}") from None
        return cls(**raw)


# A card's scalar fields: (name, accepted types, whether it may be null)
_CARD_FIELDS: tuple[tuple[str, tuple[type, ...], bool], ...] = (
    ("name", (str,), False),
    ("trained_ts", (str,), False),
    ("window_start", (str,), True),
    ("window_end", (str,), True),
    ("rows", (int,), False),
    ("threshold", (float, int), True),
)


def model_dir(lake: Lake) -> Path:
    """The folder holding the lake's models (`save` creates it for the lake's group only)."""
    return lake.root / "_state" / MODELS_DIR


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = layout.create_temp(path)  # the lake's group only, whatever the umask
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # renamed into place already, unless the write failed


def save(lake: Lake, card: ModelCard, model: object) -> Path:
    """Store `model` and its card under the lake; return the model file's path."""
    import io

    import joblib

    folder = layout.ensure_dir(model_dir(lake))
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    path = folder / f"{card.name}.joblib"
    # both files in one turn (`load` takes the same): each is replaced whole, but one after
    # the other, and a `detect` between the two read the new model with the old card
    with layout.table_lock(lake.root, MODELS_LOCK):
        _atomic_write_bytes(path, buffer.getvalue())
        _atomic_write_bytes(folder / f"{card.name}.json", card.to_json().encode())
    return path


def load(lake: Lake, name: str, features: tuple[str, ...] | None = None) -> tuple[ModelCard, Any]:
    """Return the card and the model stored as `name`, or raise ModelNotTrained: none stored,
    or (with `features`, what the caller will feed) one trained on other features, by
    another version of gpuledger."""
    import io

    import joblib

    folder = model_dir(lake)
    card_path, model_path = folder / f"{name}.json", folder / f"{name}.joblib"
    if not card_path.is_file() or not model_path.is_file():
        raise ModelNotTrained(
            f"No trained model {name!r} in {folder} (run `gpuledger evaluate` or train it first)"
        )
    try:
        with layout.table_lock(lake.root, MODELS_LOCK):  # (not between `save`'s two replaces)
            card_text, model_bytes = card_path.read_bytes(), model_path.read_bytes()
    except FileNotFoundError:  # removed since (`evaluate` clearing its models)
        raise ModelNotTrained(f"The model {name!r} in {folder} was removed") from None
    try:
        card = ModelCard.from_json(card_text.decode("utf-8"))
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError: too
        raise DamagedFile(card_path, f"{type(exc).__name__}: {exc}", "model card") from exc
    if features is not None and card.features != tuple(features):
        raise ModelNotTrained(
            f"The model {name!r} in {folder} was trained on {len(card.features)} features, not "
            f"the {len(features)} this version feeds it (another version of gpuledger trained "
            "it): train it again (`gpuledger train`)"
        )
    try:
        model = joblib.load(io.BytesIO(model_bytes))
    except Exception as exc:  # unpickling garbage raises almost anything; name the file
        raise DamagedFile(model_path, f"{type(exc).__name__}: {exc}", "model") from exc
    return card, model


def now_iso(now: dt.datetime | None = None) -> str:
    """An ISO UTC timestamp for cards."""
    return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).isoformat(timespec="seconds")
