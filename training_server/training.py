"""Fit, calibrate and score one target's model. Pure: arrays in, model and metrics out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shared.backends import Backend, FitParams
from shared.features import Columns, build_matrix
from training_server.calibration import conformal_log_offset, split_oldest
from training_server.evaluation import evaluate

# Share of the held-out rows (the oldest) that calibrates; the newer rest evaluates.
CALIBRATION_SHARE = 0.5


@dataclass
class TargetFit:
    model: Any | None
    features: tuple[str, ...]
    train_samples: int
    test_samples: int
    metrics: dict[str, float | None] = field(default_factory=dict)
    log_offset: float = 0.0  # conformal correction served with the model


def fit_target(
    backend: Backend,
    params: FitParams,
    names: Sequence[str],
    train: tuple[Columns, np.ndarray],
    test: tuple[Columns, np.ndarray],
    *,
    min_samples: int,
) -> TargetFit:
    """Train on `train` if it holds at least `min_samples` rows. The held-out `test` rows
    (oldest first) are split in time: the older half calibrates, the newer half scores the
    calibrated predictions, i.e. exactly what the prediction servers will answer."""
    (train_cols, y_train), (test_cols, y_test) = train, test
    result = TargetFit(None, tuple(names), len(y_train), len(y_test))
    if len(y_train) < min_samples:
        return result
    result.model = backend.fit(build_matrix(train_cols, names), y_train, params, names)
    (cal_cols, y_cal), (eval_cols, y_eval) = split_oldest(test_cols, y_test, CALIBRATION_SHARE)
    if len(y_cal):
        raw_cal = backend.predict(result.model, build_matrix(cal_cols, names))
        result.log_offset = conformal_log_offset(y_cal, raw_cal, params.quantile)
    if len(y_eval):
        raw = np.maximum(backend.predict(result.model, build_matrix(eval_cols, names)), 0.0)
        result.metrics = evaluate(y_eval, raw * math.exp(result.log_offset), params.quantile)
        result.metrics["raw_coverage"] = float(np.mean(y_eval <= raw))
    else:
        result.metrics = evaluate(y_eval, y_eval, params.quantile)
    return result
