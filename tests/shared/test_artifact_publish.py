"""Publishing bundles: pruning old versions, atomic CURRENT, a target left to the prior."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

from devkit.synthetic import synthetic_rows
from shared.artifact import (
    CURRENT_POINTER,
    MANIFEST,
    VERSIONS_DIR,
    Manifest,
    bundle_dir_for,
    prune_versions,
    publish_pointer,
    read_current_version,
    write_bundle,
)
from shared.decoding import decode_prediction_rows
from shared.features import build_matrix
from shared.predictor import load_bundle, load_current_bundle
from shared.prior import prior_predict
from shared.settings import ModelType, ObjectiveType
from shared.target_space import to_ms
from shared.targets import Target
from tests.conftest import publish_trained_bundle

COLUMNS = decode_prediction_rows(synthetic_rows(64, seed=99))


def _reuse_models(model_dir: Path, version: str) -> tuple[Manifest, dict[Target, Any]]:
    bundle = load_bundle(model_dir, version)
    assert bundle.manifest is not None
    return bundle.manifest, dict(bundle.models)


def _as_version(manifest: Manifest, version: str) -> Manifest:
    return manifest.model_copy(update={"version": version}, deep=True)


def test_write_bundle_prunes_to_keep_newest(model_dir: Path) -> None:
    first = publish_trained_bundle(model_dir, version="20260101T000000.000000Z")
    manifest, models = _reuse_models(model_dir, first.version)
    names = [f"20260101T00000{i}.000000Z" for i in range(1, 6)]
    for name in names:
        write_bundle(model_dir, _as_version(manifest, name), models, keep=3)
    remaining = sorted(p.name for p in (model_dir / VERSIONS_DIR).iterdir())
    assert remaining == names[-3:]
    assert read_current_version(model_dir) == names[-1]


def test_prune_never_deletes_the_published_version(model_dir: Path) -> None:
    first = publish_trained_bundle(model_dir, version="20260101T000000.000000Z")
    manifest, models = _reuse_models(model_dir, first.version)
    names = [first.version] + [f"20260101T00000{i}.000000Z" for i in range(1, 5)]
    for name in names[1:]:
        write_bundle(model_dir, _as_version(manifest, name), models, keep=10)
    publish_pointer(model_dir, names[0])  # roll back to the oldest
    doomed = prune_versions(model_dir, keep=2)
    assert doomed == names[1:3]
    remaining = sorted(p.name for p in (model_dir / VERSIONS_DIR).iterdir())
    assert remaining == [names[0], *names[3:]]
    current = load_current_bundle(model_dir)
    assert current is not None and current.version == names[0]


def test_publish_leaves_no_temporary_files(model_dir: Path) -> None:
    first = publish_trained_bundle(model_dir)
    second = publish_trained_bundle(model_dir, seed=2)
    assert sorted(p.name for p in model_dir.iterdir()) == [CURRENT_POINTER, VERSIONS_DIR]
    assert sorted(p.name for p in (model_dir / VERSIONS_DIR).iterdir()) == sorted(
        [first.version, second.version]
    )
    assert (model_dir / CURRENT_POINTER).read_text() == f"{second.version}\n"


def test_target_without_model_is_served_by_the_prior(model_dir: Path) -> None:
    first = publish_trained_bundle(model_dir, ModelType.LIGHTGBM, ObjectiveType.MEAN)
    manifest, models = _reuse_models(model_dir, first.version)
    half = _as_version(manifest, "20991231T000000.000000Z")
    half.created_at = datetime.now(UTC)
    write_bundle(model_dir, half, {Target.TTFT: models[Target.TTFT], Target.TPOT: None})
    raw = json.loads((bundle_dir_for(model_dir, half.version) / MANIFEST).read_text())
    assert raw["targets"]["tpot"]["file"] is None and raw["targets"]["tpot"]["sha256"] is None
    assert not (bundle_dir_for(model_dir, half.version) / "tpot.txt").exists()

    bundle = load_current_bundle(model_dir)
    assert bundle is not None and bundle.version == half.version
    assert bundle.has_model(Target.TTFT) and not bundle.has_model(Target.TPOT)
    predictions = bundle.predict(COLUMNS)
    np.testing.assert_array_equal(predictions[Target.TPOT], prior_predict(Target.TPOT, COLUMNS))
    ttft_file = bundle_dir_for(model_dir, half.version) / raw["targets"]["ttft"]["file"]
    x = build_matrix(COLUMNS, raw["targets"]["ttft"]["features"])
    output = lgb.Booster(model_file=str(ttft_file)).predict(x)
    assert isinstance(output, np.ndarray)  # dense rows in, dense out (LightGBM types allow sparse)
    np.testing.assert_allclose(
        predictions[Target.TTFT],
        to_ms(half.targets[Target.TTFT].space, COLUMNS, output),
        rtol=1e-4,
    )
