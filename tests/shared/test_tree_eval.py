"""The complete-tree walks (C and numpy) predict what the libraries predict (1e-4 relative,
the contract's bar; measured ~1e-6), for both backends, both objectives, models without
trees, deeper legacy shapes, and through a loaded bundle at several batch sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from devkit.synthetic import synthetic_rows
from shared.backends import BACKENDS, FitParams
from shared.decoding import decode_prediction_rows
from shared.features import build_matrix
from shared.predictor import load_current_bundle
from shared.served import NUMPY_WALK_MAX_ROWS
from shared.settings import ModelType, ObjectiveType
from shared.target_space import to_ms
from shared.targets import TARGETS
from shared.tree_eval import EVALUATOR, compiled_or_none
from tests.conftest import publish_trained_bundle

NAMES = tuple("abcdef")


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 100, (n, len(NAMES))).astype(np.float32)
    x[:, 2] = rng.integers(0, 5, n)  # a few distinct values: splits land exactly on them
    return x, np.log1p(3 * x[:, 0] + x[:, 1] ** 1.5 + rng.normal(0, 5, n) ** 2)


@pytest.mark.parametrize(
    "shape",
    [(100, 4), (0, 4), (200, 6), (7, 2)],
    ids=["shipped", "no-trees", "legacy-deep", "shallow"],
)
@pytest.mark.parametrize("objective", list(ObjectiveType))
@pytest.mark.parametrize("model_type", list(ModelType))
def test_compiled_equals_the_library(
    model_type: ModelType, objective: ObjectiveType, shape: tuple[int, int], tmp_path: Path
) -> None:
    backend = BACKENDS[model_type]
    x, y = data(3000, seed=1)
    trees, depth = shape
    params = FitParams(
        objective, 0.9, n_estimators=trees, max_depth=depth, monotone=(1, 0, 0, 0, 0, 0)
    )
    path = tmp_path / f"model{backend.file_suffix}"
    backend.save(backend.fit(x, y, params, NAMES), path)
    model = backend.load(path)  # the served copy, as read from the bundle
    compiled = compiled_or_none(backend.compile, model, len(NAMES), backend.predict)
    assert compiled is not None
    fresh, _ = data(2000, seed=2)
    fresh[:50, 2] = np.repeat(np.arange(5), 10)  # values on the split points themselves
    want = backend.predict(model, fresh)
    for walk in (compiled.predict_c, compiled.predict_numpy):
        np.testing.assert_allclose(walk(fresh), want, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(walk(fresh[:1]), want[:1], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(walk(fresh[:17]), want[:17], rtol=1e-4, atol=1e-6)


def test_the_c_walk_is_built_and_serves() -> None:
    # The README's install compiles it (setup.py); without it the numpy walk serves, slower.
    assert EVALUATOR == "c"


def test_the_c_walk_refuses_shapes_its_buffers_do_not_hold(tmp_path: Path) -> None:
    backend = BACKENDS[ModelType.XGBOOST]
    x, y = data(500, seed=4)
    path = tmp_path / "model.json"
    backend.save(
        backend.fit(
            x, y, FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=5, max_depth=3), NAMES
        ),
        path,
    )
    compiled = compiled_or_none(backend.compile, backend.load(path), len(NAMES), backend.predict)
    assert compiled is not None
    with pytest.raises(ValueError, match="column outside the matrix"):
        compiled.predict_c(x[:, :1])  # splits on columns this matrix lacks


def test_a_model_with_an_output_transform_keeps_the_library() -> None:
    x, y = data(500, seed=3)
    model = xgb.train({"objective": "reg:logistic", "max_depth": 3}, xgb.DMatrix(x, label=y > 4), 5)
    backend = BACKENDS[ModelType.XGBOOST]
    assert compiled_or_none(backend.compile, model, len(NAMES), backend.predict) is None


@pytest.mark.parametrize("model_type", list(ModelType))
@pytest.mark.parametrize("rows", [1, NUMPY_WALK_MAX_ROWS, 3 * NUMPY_WALK_MAX_ROWS])
def test_bundle_serves_what_the_library_predicts(
    model_type: ModelType, rows: int, model_dir: Path
) -> None:
    manifest = publish_trained_bundle(model_dir, model_type, seed=5)
    bundle = load_current_bundle(model_dir)
    assert bundle is not None and set(bundle.compiled) == set(TARGETS)
    columns = decode_prediction_rows(synthetic_rows(rows, seed=6))
    served = bundle.predict(columns)
    for target in TARGETS:
        entry = manifest.targets[target]
        library = BACKENDS[model_type].predict(
            bundle.models[target], build_matrix(columns, entry.features)
        )
        want = to_ms(entry.space, columns, library) * bundle.scales[target]
        np.testing.assert_allclose(served[target], want, rtol=1e-4)
