"""Model bundles on disk: written atomically, verified on load, refused when corrupt."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb

from devkit.synthetic import synthetic_rows
from shared.artifact import (
    MANIFEST,
    BundleError,
    bundle_dir_for,
    publish_pointer,
    sha256_file,
)
from shared.decoding import decode_prediction_rows
from shared.features import build_matrix
from shared.predictor import load_bundle, load_current_bundle
from shared.settings import ModelType, ObjectiveType
from shared.target_space import space_for, to_ms
from shared.targets import TARGETS
from tests.conftest import publish_trained_bundle

COLUMNS = decode_prediction_rows(synthetic_rows(64, seed=99))


def native_predict(model_type: ModelType, path: Path, x: np.ndarray) -> np.ndarray:
    """The library's own predict on its own file, bypassing shared.backends."""
    if model_type is ModelType.XGBOOST:
        booster = xgb.Booster(model_file=str(path))
        return booster.predict(xgb.DMatrix(x, feature_names=booster.feature_names))
    output = lgb.Booster(model_file=str(path)).predict(x)
    assert isinstance(output, np.ndarray)  # dense rows in, dense out (LightGBM types allow sparse)
    return output


def manifest_json(model_dir: Path, version: str) -> tuple[Path, dict[str, Any]]:
    path = bundle_dir_for(model_dir, version) / MANIFEST
    return path, json.loads(path.read_text())


def test_bundle_round_trip_predicts_like_the_library(
    model_dir: Path, model_choice: tuple[ModelType, ObjectiveType]
) -> None:
    model_type, objective = model_choice
    manifest = publish_trained_bundle(model_dir, model_type, objective, seed=1)
    bundle = load_current_bundle(model_dir)
    assert bundle is not None and not bundle.is_prior
    assert (bundle.version, bundle.model_type, bundle.objective, bundle.quantile) == (
        manifest.version,
        model_type,
        objective,
        0.9,
    )
    predictions = bundle.predict(COLUMNS)
    bundle_dir = bundle_dir_for(model_dir, manifest.version)
    for target in TARGETS:
        entry = manifest.targets[target]
        assert entry.file is not None  # a trained bundle: every target has its model file
        assert entry.space is space_for(target)
        x = build_matrix(COLUMNS, entry.features)
        want = native_predict(model_type, bundle_dir / entry.file, x)
        assert want.shape == (64,) and np.ptp(want) > 0  # a real model, not a constant
        np.testing.assert_allclose(
            predictions[target], np.maximum(to_ms(entry.space, COLUMNS, want), 0.0), rtol=1e-4
        )


def test_bundle_from_before_target_spaces_predicts_plain_ms(model_dir: Path) -> None:
    """A manifest without "space" (written before shared.target_space) still serves: its
    trees predict ms directly."""
    manifest = publish_trained_bundle(model_dir, legacy_ms=True, seed=3)
    path, raw = manifest_json(model_dir, manifest.version)
    for entry in raw["targets"].values():
        del entry["space"]
    path.write_text(json.dumps(raw))
    bundle = load_current_bundle(model_dir)
    assert bundle is not None
    predictions = bundle.predict(COLUMNS)
    for target in TARGETS:
        entry = manifest.targets[target]
        assert entry.file is not None
        want = native_predict(
            ModelType.XGBOOST, path.parent / entry.file, build_matrix(COLUMNS, entry.features)
        )
        assert np.median(want) > 1.0  # milliseconds, not log-milliseconds
        np.testing.assert_allclose(predictions[target], np.maximum(want, 0.0), rtol=1e-4)


def test_calibration_factor_scales_the_library_prediction(model_dir: Path) -> None:
    manifest = publish_trained_bundle(model_dir, seed=2)
    path, raw = manifest_json(model_dir, manifest.version)
    raw["targets"]["ttft"]["calibration_log_offset"] = 0.25
    raw["targets"]["tpot"]["calibration_log_offset"] = -0.5
    path.write_text(json.dumps(raw))
    bundle = load_current_bundle(model_dir)
    assert bundle is not None
    predictions = bundle.predict(COLUMNS)
    for target, offset in zip(TARGETS, (0.25, -0.5), strict=True):
        entry = manifest.targets[target]
        assert entry.file is not None
        want = native_predict(
            ModelType.XGBOOST, path.parent / entry.file, build_matrix(COLUMNS, entry.features)
        )
        want = to_ms(entry.space, COLUMNS, want)
        np.testing.assert_allclose(
            predictions[target], np.maximum(want, 0.0) * np.exp(offset), rtol=1e-4
        )


def test_manifest_records_sha256_of_every_file(
    model_dir: Path, model_choice: tuple[ModelType, ObjectiveType]
) -> None:
    manifest = publish_trained_bundle(model_dir, *model_choice)
    _, raw = manifest_json(model_dir, manifest.version)
    bundle_dir = bundle_dir_for(model_dir, manifest.version)
    assert raw["model_type"] == model_choice[0].value
    assert raw["objective"] == model_choice[1].value
    files = set()
    for target in TARGETS:
        entry = raw["targets"][target.value]
        data = (bundle_dir / entry["file"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert len(entry["features"]) > 0
        files.add(entry["file"])
    assert {p.name for p in bundle_dir.iterdir()} == files | {MANIFEST}


def _flip_byte(bundle_dir: Path, raw: dict[str, Any]) -> None:
    path = bundle_dir / raw["targets"]["ttft"]["file"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _point_at_missing_file(bundle_dir: Path, raw: dict[str, Any]) -> None:
    raw["targets"]["tpot"]["file"] = "no-such-model.json"


def _escape_bundle_dir(bundle_dir: Path, raw: dict[str, Any]) -> None:
    name = raw["targets"]["ttft"]["file"]
    (bundle_dir.parent / name).write_bytes((bundle_dir / name).read_bytes())
    raw["targets"]["ttft"]["file"] = f"../{name}"


def _wrong_feature_count(bundle_dir: Path, raw: dict[str, Any]) -> None:
    raw["targets"]["ttft"]["features"] = raw["targets"]["ttft"]["features"][:-1]


def _drop_target(bundle_dir: Path, raw: dict[str, Any]) -> None:
    del raw["targets"]["tpot"]


def _unknown_manifest_field(bundle_dir: Path, raw: dict[str, Any]) -> None:
    raw["surprise"] = 1


def _absurd_calibration(bundle_dir: Path, raw: dict[str, Any]) -> None:
    raw["targets"]["tpot"]["calibration_log_offset"] = 5.0  # a 148x factor


CORRUPTIONS: dict[str, tuple[Callable[[Path, dict[str, Any]], None], str]] = {
    "flipped-byte": (_flip_byte, "checksum"),
    "missing-model-file": (_point_at_missing_file, "missing model file"),
    "file-outside-bundle": (_escape_bundle_dir, "missing model file"),
    "wrong-feature-count": (_wrong_feature_count, "features"),
    "target-missing": (_drop_target, "tpot"),
    "unknown-manifest-field": (_unknown_manifest_field, "invalid manifest"),
    "absurd-calibration": (_absurd_calibration, "calibration_log_offset"),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_corrupt_bundle_is_refused(model_dir: Path, case: str) -> None:
    corrupt, message = CORRUPTIONS[case]
    manifest = publish_trained_bundle(model_dir)
    path, raw = manifest_json(model_dir, manifest.version)
    corrupt(path.parent, raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(BundleError, match=message):
        load_current_bundle(model_dir)
    with pytest.raises(BundleError):
        load_bundle(model_dir, manifest.version)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no manifest"),
        (b"{not json", "invalid manifest"),
        (b"[]", "invalid manifest"),
        (b"", "invalid manifest"),
    ],
)
def test_missing_or_unparsable_manifest_is_refused(
    model_dir: Path, content: bytes | None, message: str
) -> None:
    manifest = publish_trained_bundle(model_dir)
    path = bundle_dir_for(model_dir, manifest.version) / MANIFEST
    path.unlink() if content is None else path.write_bytes(content)
    with pytest.raises(BundleError, match=message):
        load_current_bundle(model_dir)


@pytest.mark.parametrize("pointer", ["never-written", "../outside", "a/b"])
def test_current_pointing_nowhere_is_refused(model_dir: Path, pointer: str) -> None:
    publish_trained_bundle(model_dir)
    publish_pointer(model_dir, pointer)
    with pytest.raises(BundleError):
        load_current_bundle(model_dir)


def test_nothing_published_loads_none(model_dir: Path) -> None:
    assert load_current_bundle(model_dir) is None


_LOAD_SCRIPT = """
import sys
from pathlib import Path
from shared.artifact import BundleError
from shared.predictor import load_current_bundle
try:
    load_current_bundle(Path(sys.argv[1]))
except BundleError as exc:
    print("BundleError:", str(exc)[:200])
else:
    print("LOADED")
"""


@pytest.mark.parametrize(
    "model_type",
    # Regression: a truncated LightGBM text once aborted the process (SIGABRT) in the parser.
    [ModelType.XGBOOST, ModelType.LIGHTGBM],
)
def test_truncated_model_with_matching_sha_fails_to_load(
    model_dir: Path, model_type: ModelType
) -> None:
    manifest = publish_trained_bundle(model_dir, model_type)
    path, raw = manifest_json(model_dir, manifest.version)
    model_path = path.parent / raw["targets"]["ttft"]["file"]
    data = model_path.read_bytes()
    model_path.write_bytes(data[: len(data) // 2])
    raw["targets"]["ttft"]["sha256"] = sha256_file(model_path)
    path.write_text(json.dumps(raw))
    # In a child process: a library that aborts must not take the test run down with it.
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_SCRIPT, str(model_dir)], capture_output=True, timeout=120
    )
    stdout = done.stdout.decode(errors="replace")
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-500:]
    assert stdout.startswith("BundleError:") and "cannot load" in stdout


def test_manifest_with_unknown_feature_name_is_refused(model_dir: Path) -> None:
    """Regression: an unknown name once loaded, then every predict raised KeyError."""
    manifest = publish_trained_bundle(model_dir)
    path, raw = manifest_json(model_dir, manifest.version)
    raw["targets"]["ttft"]["features"][0] = "feature_from_a_newer_trainer"
    path.write_text(json.dumps(raw))
    with pytest.raises(BundleError, match="unknown ttft features"):
        load_current_bundle(model_dir)
