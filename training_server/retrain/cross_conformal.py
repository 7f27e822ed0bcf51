"""The bundle's calibration factor, fixed per bundle: cross-conformal, from out-of-fold scores
of the training rows themselves (retrain.live_calibration then corrects it between bundles).

Split conformal needs rows no model saw, and a trainer that holds out 10 % of what it
receives and calibrates on half of those has ~75 rows after 1,500: too few for a factor
(the split-conformal trainer it replaced needed 100, so offline its factor never applied).
Cross-conformal uses every training row instead: the rows are cut into K folds, each fold
is predicted by a model fitted on the other K - 1, and the log-ratios actual / prediction
of all rows (each scored by a model that never saw it) give the finite-sample conformal
quantile, served as one factor with the model refitted on all rows (a slightly better
model than the fold models, so the factor errs on the safe side). The same out-of-fold
predictions score the candidate models (retrain.select).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from shared.features import Columns

# K: each fold model sees two thirds of the rows. 3 folds, not 5, at every size: 2 fewer fits
# per tree candidate keep a retrain at 200k stored rows within its budget, and many pools
# on one core within their interval; below 5,000 rows 5 folds chose and calibrated no
# better on the replays (benchmarks/README.md, bench_pools_loop.py).
FOLDS = 3
# With fewer scores the conformal quantile is one of the few largest: an outlier's factor
# (3 slow first requests among 44 rows made a 1.7x TPOT factor in a replay, the p90 itself
# is already a quantile of those rows). The live calibration corrects until then.
MIN_OOF_ROWS = 100
# A factor outside e^-3..e^3 (0.05x..20x) means the model is broken, not mis-calibrated
# (the bundle format refuses more).
MAX_ABS_LOG_OFFSET = 3.0
_EPS_MS = 1e-3

FitPredict = Callable[[Columns, np.ndarray, Columns], np.ndarray]


def fold_ids(n: int, folds: int = FOLDS) -> np.ndarray:
    """Fold of each row: rows dealt in turn, so every fold spans the whole time range (the
    fold models interpolate as the served model does between its own rows)."""
    return np.arange(n) % max(1, min(folds, n))


def take(columns: Columns, mask: np.ndarray) -> Columns:
    return {name: values[mask] for name, values in columns.items()}


def out_of_fold(
    fit_predict: FitPredict, columns: Columns, y: np.ndarray, folds: np.ndarray
) -> np.ndarray:
    """Each row's prediction (ms) by a model fitted on the other folds."""
    predicted = np.empty(len(y), dtype=np.float64)
    for fold in np.unique(folds):
        held = folds == fold
        predicted[held] = fit_predict(take(columns, ~held), y[~held], take(columns, held))
    return predicted


def log_scores(actual: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    scores: np.ndarray = np.log(np.maximum(actual, _EPS_MS)) - np.log(
        np.maximum(predicted, _EPS_MS)
    )
    return scores


def conformal_offset(scores: np.ndarray, quantile: float, *, min_rows: int | None = None) -> float:
    """The ceil((n + 1) q)-th smallest score (the finite-sample conformal quantile) as a
    log factor, within +-MAX_ABS_LOG_OFFSET; 0 with fewer than `min_rows` scores."""
    n = len(scores)
    if n < (MIN_OOF_ROWS if min_rows is None else min_rows):
        return 0.0
    rank = min(n, math.ceil((n + 1) * quantile))
    offset = float(np.partition(scores, rank - 1)[rank - 1])
    return max(-MAX_ABS_LOG_OFFSET, min(MAX_ABS_LOG_OFFSET, offset))
