"""Fit and score one target's model (training_server.model_selection decides which one).
Pure: arrays in, model and metrics out."""

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
from shared.target_space import TargetSpace, space_for, to_label, to_ms
from shared.targets import Target
from training_server.evaluation import evaluate, regime_coverage

# From this many rows a target is answered by their quantile instead of the prior.
MIN_ROWS_FOR_A_QUANTILE = 10
# A fit gets one thread per this many rows (up to the configured threads): a second thread
# gains nothing on small fits, which are most of them now (5 per candidate per retrain;
# measured on TTFT rows: 1,500 and 8,000 rows 0.07 / 0.12-0.14 s with 1 or 2 threads,
# 40,000 rows 0.34 -> 0.28 s), and leaves the other core to the servers.
MIN_ROWS_PER_EXTRA_THREAD = 20_000
# Trees start from the labels' median, below the p90 they converge to: they climb 9x faster
# than they descend (shared.backends), so they reach the p90 of each regime in fewer trees
# (offline, 10 seeds: sharegpt TTFT 11.5 -> 8.5, chatbot TTFT 530 -> 515; benchmarks/README).
TREES_START_QUANTILE = 0.5


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
    choice: str | None = None  # the candidate served (training_server.candidates)
    # Out-of-fold pinball loss of every candidate considered (training_server.model_selection).
    candidates: dict[str, float] = field(default_factory=dict)


def fit_model(
    backend: Backend,
    params: FitParams,
    names: Sequence[str],
    columns: Columns,
    y: np.ndarray,
    space: TargetSpace,
) -> Any:
    """A model of `space` fitted on actuals `y` (ms)."""
    threads = min(params.threads or available_cpus(), 1 + len(y) // MIN_ROWS_PER_EXTRA_THREAD)
    return backend.fit(
        build_matrix(columns, names),
        to_label(space, columns, y),
        replace(params, threads=max(1, threads)),
        names,
    )


def score_held_out(
    backend: Backend, fit: TargetFit, held_out: tuple[Columns, np.ndarray], quantile: float
) -> None:
    """Metrics of what the prediction servers will answer with `fit`, on rows it never saw,
    overall and per regime (into fit.metrics and fit.regimes)."""
    columns, y = held_out
    if len(y):
        raw = uncalibrated_ms(backend, fit, columns)
        served = raw * math.exp(fit.log_offset)
        fit.metrics = evaluate(y, served, quantile)
        fit.metrics["raw_coverage"] = float(np.mean(y <= raw))
        fit.regimes = regime_coverage(columns, y, served)
    else:
        fit.metrics = evaluate(y, y, quantile)
    fit.metrics["calibration_log_offset"] = fit.log_offset


def uncalibrated_ms(backend: Backend, fit: TargetFit, columns: Columns) -> np.ndarray:
    """The fitted model's answer in ms, before the calibration factor."""
    return model_ms(backend, fit.model, fit.features, fit.space, columns)


def model_ms(
    backend: Backend, model: Any, names: Sequence[str], space: TargetSpace, columns: Columns
) -> np.ndarray:
    """`model`'s answer in ms (a model of `space`), before any calibration factor."""
    output = backend.predict(model, build_matrix(columns, names))
    ms: np.ndarray = np.maximum(to_ms(space, columns, output), 0.0)
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
        min_rows_per_leaf=(
            s.ttft_min_rows_per_leaf if target is Target.TTFT else s.tpot_min_rows_per_leaf
        ),
        # 0: the container's CPU quota; the libraries would take the node's core count.
        threads=s.train_threads or available_cpus(),
        monotone=monotone_constraints(
            target, names, per_queued=space_for(target) is TargetSpace.LOG_MS_PER_QUEUED
        ),
        start_quantile=TREES_START_QUANTILE,
    )
