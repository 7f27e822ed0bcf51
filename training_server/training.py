"""Fit and score one target's model. Pure: arrays in, model and metrics out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shared.backends import Backend, FitParams
from shared.features import Columns, build_matrix
from training_server.evaluation import evaluate


@dataclass
class TargetFit:
    model: Any | None
    features: tuple[str, ...]
    train_samples: int
    test_samples: int
    metrics: dict[str, float | None] = field(default_factory=dict)


def fit_target(
    backend: Backend,
    params: FitParams,
    names: Sequence[str],
    train: tuple[Columns, np.ndarray],
    test: tuple[Columns, np.ndarray],
    *,
    min_samples: int,
) -> TargetFit:
    """Train on `train` if it holds at least `min_samples` rows; score on `test`."""
    (train_cols, y_train), (test_cols, y_test) = train, test
    result = TargetFit(None, tuple(names), len(y_train), len(y_test))
    if len(y_train) < min_samples:
        return result
    result.model = backend.fit(build_matrix(train_cols, names), y_train, params, names)
    if len(y_test):
        predicted = np.maximum(backend.predict(result.model, build_matrix(test_cols, names)), 0.0)
        result.metrics = evaluate(y_test, predicted, params.quantile)
    else:
        result.metrics = evaluate(y_test, y_test, params.quantile)
    return result
