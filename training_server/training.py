"""Fit, calibrate and score one target's model. Pure: arrays in, model and metrics out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from shared.backends import Backend, FitParams
from shared.cpus import available_cpus
from shared.features import Columns, build_matrix, monotone_constraints
from shared.settings import TrainingSettings
from shared.target_space import TargetSpace, to_label, to_ms
from shared.targets import Target
from training_server.calibration import conformal_log_offset, split_oldest
from training_server.evaluation import evaluate, regime_coverage

# Share of the held-out rows (the oldest) that calibrates; the newer rest evaluates.
CALIBRATION_SHARE = 0.5
# From this many rows a target is answered by their quantile instead of the prior.
MIN_ROWS_FOR_A_QUANTILE = 10


@dataclass
class TargetFit:
    model: Any | None
    features: tuple[str, ...]
    train_samples: int
    test_samples: int
    metrics: dict[str, float | None] = field(default_factory=dict)
    log_offset: float = 0.0  # conformal correction served with the model
    space: TargetSpace = TargetSpace.MS
    regimes: dict[str, dict[str, float | int]] = field(default_factory=dict)


def fit_target(
    backend: Backend,
    params: FitParams,
    names: Sequence[str],
    train: tuple[Columns, np.ndarray],
    test: tuple[Columns, np.ndarray],
    *,
    space: TargetSpace,
    min_samples: int,
    calibrate: bool = True,
) -> TargetFit:
    """Train on `train` (actuals in ms, fitted in `space`): trees from `min_samples` rows,
    the rows' quantile alone from MIN_ROWS_FOR_A_QUANTILE, nothing below. The held-out
    `test` rows (oldest first) are split in time: the older half calibrates (unless
    `calibrate` is off), the newer half scores the calibrated predictions, i.e. exactly what
    the prediction servers will answer, overall and per regime."""
    (train_cols, y_train), (test_cols, y_test) = train, test
    result = TargetFit(None, tuple(names), len(y_train), len(y_test), space=space)
    if len(y_train) < MIN_ROWS_FOR_A_QUANTILE:
        return result  # the cold-start prior answers
    if len(y_train) < min_samples:
        # Too few rows for trees, enough to beat a formula: the rows' own quantile (in
        # `space`, so TTFT still scales with the queue), a model with no trees.
        params = replace(params, n_estimators=0)
    label = to_label(space, train_cols, y_train)
    result.model = backend.fit(build_matrix(train_cols, names), label, params, names)
    (cal_cols, y_cal), (eval_cols, y_eval) = split_oldest(test_cols, y_test, CALIBRATION_SHARE)
    if calibrate and len(y_cal):
        raw_cal = uncalibrated_ms(backend, result, cal_cols)
        result.log_offset = conformal_log_offset(y_cal, raw_cal, params.quantile)
    if len(y_eval):
        raw = uncalibrated_ms(backend, result, eval_cols)
        served = raw * math.exp(result.log_offset)
        result.metrics = evaluate(y_eval, served, params.quantile)
        result.metrics["raw_coverage"] = float(np.mean(y_eval <= raw))
        result.regimes = regime_coverage(eval_cols, y_eval, served)
    else:
        result.metrics = evaluate(y_eval, y_eval, params.quantile)
    result.metrics["calibration_log_offset"] = result.log_offset
    return result


def uncalibrated_ms(backend: Backend, fit: TargetFit, columns: Columns) -> np.ndarray:
    """The fitted model's answer in ms, before the calibration factor."""
    output = backend.predict(fit.model, build_matrix(columns, fit.features))
    ms: np.ndarray = np.maximum(to_ms(fit.space, columns, output), 0.0)
    return ms


def served_ms(backend: Backend, fit: TargetFit, columns: Columns) -> np.ndarray:
    """What a prediction server answers with this fit (before any live correction)."""
    return uncalibrated_ms(backend, fit, columns) * math.exp(fit.log_offset)


def fit_params(settings: TrainingSettings, target: Target, names: Sequence[str]) -> FitParams:
    """The settings' hyperparameters plus `target`'s monotone constraints."""
    s = settings
    return FitParams(
        objective=s.objective_type,
        quantile=s.quantile_alpha,
        n_estimators=s.n_estimators,
        max_depth=s.max_depth,
        learning_rate=s.learning_rate,
        min_rows_per_leaf=(s.ttft_min_rows_per_leaf if target is Target.TTFT
                           else s.tpot_min_rows_per_leaf),
        # 0: the container's CPU quota; the libraries would take the node's core count.
        threads=s.train_threads or available_cpus(),
        monotone=monotone_constraints(target, names),
    )
