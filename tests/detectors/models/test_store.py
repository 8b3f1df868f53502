"""The model store: a model and its card go in and come back; a missing one is named."""

from __future__ import annotations

import pytest

from detectors.models.store import ModelCard, ModelNotTrained, load, model_dir, save
from warehouse.errors import DamagedFile
from warehouse.lake import Lake


def card(name="m"):
    return ModelCard(
        name=name,
        features=("a", "b"),
        trained_ts="2026-12-01T00:00:00+00:00",
        window_start="2026-11-02T00:00:00+00:00",
        window_end="2026-11-09T00:00:00+00:00",
        clusters=("sim",),
        rows=10,
        threshold=0.7,
        metrics={"recall": 0.9},
        params={"horizon_h": 24.0},
    )


def test_a_model_and_its_card_round_trip(tmp_path):
    save(Lake.at(tmp_path), card(), {"weights": [1, 2, 3]})
    got_card, model = load(Lake.at(tmp_path), "m")
    assert got_card == card()
    assert model == {"weights": [1, 2, 3]}
    assert (model_dir(Lake.at(tmp_path)) / "m.json").is_file()


def test_saving_again_replaces(tmp_path):
    save(Lake.at(tmp_path), card(), 1)
    save(Lake.at(tmp_path), card(), 2)
    assert load(Lake.at(tmp_path), "m")[1] == 2
    assert sorted(p.name for p in model_dir(Lake.at(tmp_path)).iterdir()) == ["m.joblib", "m.json"]


def test_a_model_is_never_read_with_another_saves_card(tmp_path):
    # `save` replaces the model, then its card: a `detect` between the two read the new model
    # with the old card (its threshold, its features). Both are saved and read in one turn.
    import dataclasses
    import threading

    from detectors.models.store import MODELS_LOCK
    from warehouse import layout

    lake = Lake.at(tmp_path)
    save(lake, card(), 1)
    newer = dataclasses.replace(card(), threshold=0.9)
    got: list[tuple[ModelCard, object]] = []
    with layout.table_lock(tmp_path, MODELS_LOCK):  # a save half done: its model replaced
        save(Lake.at(tmp_path / "other"), newer, 2)
        folder = model_dir(lake)
        (folder / "m.joblib").write_bytes(
            (model_dir(Lake.at(tmp_path / "other")) / "m.joblib").read_bytes()
        )
        reader = threading.Thread(target=lambda: got.append(load(lake, "m")))
        reader.start()
        reader.join(timeout=1.0)
        assert reader.is_alive() and not got  # it waits for the save to end
        (folder / "m.json").write_text(newer.to_json())
    reader.join(timeout=30)
    assert [(c.threshold, model) for c, model in got] == [(0.9, 2)]


def test_a_missing_model_is_named(tmp_path):
    with pytest.raises(ModelNotTrained, match="'early_waste_30m'"):
        load(Lake.at(tmp_path), "early_waste_30m")
    assert not (tmp_path / "_state").exists()  # looking creates nothing


@pytest.mark.parametrize(
    ("suffix", "damage"),
    [
        (".json", b"garbage\n"),
        (".json", b'{"name": "m"}'),  # a card cut short: fields missing
        (".joblib", b"garbage\n"),
        (".joblib", b""),
    ],
)
def test_a_damaged_model_or_card_is_named(tmp_path, suffix, damage):
    save(Lake.at(tmp_path), card(), {"weights": [1, 2, 3]})
    path = model_dir(Lake.at(tmp_path)) / f"m{suffix}"
    path.write_bytes(damage)
    with pytest.raises(DamagedFile) as info:
        load(Lake.at(tmp_path), "m")
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("threshold", "0.5"),  # hand-edited: polars failed deep in the scoring, in a traceback
        ("threshold", True),
        ("rows", 1.5),
        ("features", "ab"),
        ("clusters", [1]),
        ("metrics", {"recall": "high"}),
        ("params", []),
        ("trained_ts", "2026-11-06 late"),  # parsed when the model predicts: a traceback there
    ],
)
def test_a_card_field_of_the_wrong_type_is_named_as_damage(tmp_path, field, value):
    import json

    save(Lake.at(tmp_path), card(), 1)
    path = model_dir(Lake.at(tmp_path)) / "m.json"
    raw = json.loads(path.read_text())
    raw[field] = value
    path.write_text(json.dumps(raw))
    with pytest.raises(DamagedFile, match=f"'{field}'"):
        load(Lake.at(tmp_path), "m")


def test_a_card_with_a_whole_number_threshold_or_null_window_loads(tmp_path):
    import json

    save(Lake.at(tmp_path), card(), 1)
    path = model_dir(Lake.at(tmp_path)) / "m.json"
    raw = json.loads(path.read_text()) | {"threshold": 1, "window_start": None}
    path.write_text(json.dumps(raw))
    assert load(Lake.at(tmp_path), "m")[0].threshold == 1


def test_a_model_trained_on_other_features_is_not_loaded_for_these(tmp_path):
    # another version's model: scikit-learn failed on the matrix ("X has 12 features, but
    # ... is expecting 10") in a traceback at every detect
    save(Lake.at(tmp_path), card(), 1)
    assert load(Lake.at(tmp_path), "m", ("a", "b"))[1] == 1
    with pytest.raises(ModelNotTrained, match="trained on 2 features, not the 3 this version"):
        load(Lake.at(tmp_path), "m", ("a", "b", "c"))


def test_detect_leaves_out_a_model_whose_file_is_missing_or_stale_and_says_so(tmp_path, caplog):
    import datetime as dt

    from detectors.models import model_frames
    from detectors.models.early_waste import FEATURES
    from detectors.models.training import load_data
    from warehouse.connection import connect

    lake = Lake.at(tmp_path)
    save(lake, card("lemon_node"), 1)
    (model_dir(lake) / "lemon_node.joblib").unlink()  # a card standing alone: a traceback
    save(lake, card("early_waste_30m"), 1)  # features ("a", "b"): not this version's
    assert len(FEATURES) != 2
    data = load_data(connect(tmp_path))

    with caplog.at_level("WARNING"):
        frames = model_frames(lake, data, dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    assert frames == []
    assert "No trained model 'lemon_node'" in caplog.text
    assert "'early_waste_30m'" in caplog.text and "trained on 2 features" in caplog.text
