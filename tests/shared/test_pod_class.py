"""`pod_class` (ours: the pod's hardware class) in the row, its feature code, the decoders,
and bundles from before the feature existed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from devkit.synthetic import prediction_row, publish_trained_bundle, synthetic_rows
from shared.decoding import decode_prediction_rows, decode_strict_body
from shared.features import (
    CARRIED_ONLY,
    CODE_COLUMNS,
    FEATURES,
    LABEL_FIELDS,
    carried_features,
    columns_from_dicts,
    feature_names,
    monotone_constraints,
    pod_class_code,
)
from shared.predictor import load_current_bundle
from shared.schemas import REQUEST_ROW, PredictionRequest, RowKind, TrainingEntry
from shared.settings import ModelType
from shared.targets import TARGETS, Target

ROOT = Path(__file__).resolve().parents[2]

# Pinned: a code is a contract between the trainer and every prediction server (and every
# bundle already trained). A change to the function must show up here.
KNOWN_CODES = {"h200": 10893139.0, "b200": 1824676.0, "mi300x": 15193616.0}
OLD = ("pod_class_code",)  # what a bundle from before pod_class lacks


def test_pod_class_is_declared_once_as_an_optional_label() -> None:
    (field,) = [f for f in REQUEST_ROW if f.name == "pod_class"]
    assert (field.kind, field.required, field.default) == (RowKind.LABEL, False, "")
    assert "pod_class" in LABEL_FIELDS and "pod_class_code" in CODE_COLUMNS
    assert PredictionRequest.model_validate(prediction_row()).pod_class == ""
    assert PredictionRequest.model_validate(prediction_row(pod_class=None)).pod_class == ""
    assert PredictionRequest.model_validate(prediction_row(pod_class="b200")).pod_class == "b200"
    entry = TrainingEntry.model_validate(synthetic_rows(1)[0] | {"pod_class": "h200"})
    assert entry.pod_class == "h200"


@pytest.mark.parametrize("value", [7, 1.5, True, ["h200"], {"name": "h200"}])
def test_a_pod_class_of_the_wrong_type_is_an_error_naming_it(value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        PredictionRequest.model_validate(prediction_row(pod_class=value))
    assert [e["loc"] for e in caught.value.errors()] == [("pod_class",)]


@pytest.mark.parametrize(("name", "code"), sorted(KNOWN_CODES.items()))
def test_the_code_is_pinned_and_normalised(name: str, code: float) -> None:
    for spelling in (name, name.upper(), f"  {name}\t"):
        assert pod_class_code(spelling) == code
    assert np.float32(code) == code  # exact in the models' float32 input
    assert 1.0 <= code < 2.0**24


def test_no_class_is_code_zero_and_classes_differ() -> None:
    assert pod_class_code("") == pod_class_code(None) == pod_class_code("   ") == 0.0
    names = [f"class-{i}" for i in range(200)] + list(KNOWN_CODES)
    codes = [pod_class_code(n) for n in names]
    assert 0.0 not in codes and len(set(codes)) == len(names)


def test_the_code_does_not_depend_on_the_process_or_on_what_was_seen() -> None:
    """A fresh interpreter (another hash seed), having coded other classes first, agrees."""
    code = (
        "from shared.features import pod_class_code as c; "
        "[c(f'x{i}') for i in range(50)]; print(c('b200'), c('h200'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    ).stdout.split()
    assert [float(v) for v in out] == [KNOWN_CODES["b200"], KNOWN_CODES["h200"]]


def test_both_targets_take_it_without_a_monotone_constraint() -> None:
    for target in TARGETS:
        names = feature_names(target)
        assert "pod_class_code" in names and "pod_type_code" in names
        for per_queued in (False, True):
            constraints = monotone_constraints(target, names, per_queued=per_queued)
            assert constraints[names.index("pod_class_code")] == 0


def test_the_class_is_the_one_feature_listed_only_when_rows_carry_it() -> None:
    """Declared once (CARRIED_ONLY); every other feature is listed as before, even a column
    that is 0 in every row (older servers know those)."""
    assert sorted(CARRIED_ONLY) == ["pod_class_code"]
    assert all(name in FEATURES for name in CARRIED_ONLY)
    plain = columns_from_dicts(synthetic_rows(20, seed=1))
    assert not plain["encoder_input_size"].any()
    classed = columns_from_dicts([*synthetic_rows(19, seed=1), prediction_row(pod_class="h200")])
    empty = columns_from_dicts([])
    for target in TARGETS:
        names = feature_names(target)
        before = tuple(n for n in names if n != "pod_class_code")
        assert carried_features(names, plain) == carried_features(names, empty) == before
        assert carried_features(names, classed) == names


def rows_with_classes() -> list[dict[str, Any]]:
    rows = [
        {k: v for k, v in r.items() if not k.startswith("actual_")}
        for r in synthetic_rows(30, seed=4)
    ]
    classes = ["h200", "B200", None, "", " h200 "]
    for i, row in enumerate(rows):
        if i % 6 != 5:  # some rows leave the key out
            row["pod_class"] = classes[i % len(classes)]
    return rows


def test_every_decoder_codes_it_alike() -> None:
    rows = rows_with_classes()
    want = [pod_class_code(r.get("pod_class")) for r in rows]
    strict = decode_strict_body(json.dumps({"requests": rows}).encode())
    assert strict is not None  # plainly valid: the fast path took it
    fast = decode_prediction_rows(rows)
    slow = columns_from_dicts([r.model_dump() for r in map(PredictionRequest.model_validate, rows)])
    lax = decode_prediction_rows(
        [{**r, "input_token_length": str(r["input_token_length"])} for r in rows]
    )
    for columns in (strict, fast, slow, lax):
        assert set(columns) == set(slow)
        np.testing.assert_array_equal(columns["pod_class_code"], want)
        for name in slow:
            np.testing.assert_array_equal(columns[name], slow[name], err_msg=name)


def test_without_it_every_other_column_is_unchanged() -> None:
    rows = rows_with_classes()
    without = [{k: v for k, v in r.items() if k != "pod_class"} for r in rows]
    with_class, plain = decode_prediction_rows(rows), decode_prediction_rows(without)
    assert not plain["pod_class_code"].any()
    for name in plain:
        if name != "pod_class_code":
            np.testing.assert_array_equal(with_class[name], plain[name], err_msg=name)


@pytest.mark.parametrize("model_type", list(ModelType))
def test_a_bundle_from_before_the_feature_loads_and_ignores_the_class(
    model_dir: Path, model_type: ModelType
) -> None:
    manifest = publish_trained_bundle(model_dir, model_type, without_features=OLD)
    stored = json.loads((model_dir / "versions" / manifest.version / "manifest.json").read_text())
    assert "pod_class_code" not in json.dumps(stored)
    bundle = load_current_bundle(model_dir)
    assert bundle is not None and bundle.version == manifest.version
    for target in Target:
        assert "pod_class_code" not in bundle.features[target]
    rows = rows_with_classes()
    plain = [{k: v for k, v in r.items() if k != "pod_class"} for r in rows]
    with_class = bundle.predict(decode_prediction_rows(rows))
    without = bundle.predict(decode_prediction_rows(plain))
    for target in Target:
        np.testing.assert_array_equal(with_class[target], without[target])
