"""Cross-conformal pieces: folds, out-of-fold predictions, the conformal quantile."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.features import Columns
from training_server.retrain.cross_conformal import (
    FOLDS,
    MAX_ABS_LOG_OFFSET,
    MIN_OOF_ROWS,
    conformal_offset,
    fold_ids,
    log_scores,
    out_of_fold,
)


def test_folds_deal_rows_in_turn_so_each_spans_the_window() -> None:
    folds = fold_ids(12, 5)
    assert folds.tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert fold_ids(3, 5).tolist() == [0, 1, 2]  # never an empty fold


def test_every_row_is_predicted_by_a_model_that_never_saw_it() -> None:
    n = 23
    columns: Columns = {"row": np.arange(n, dtype=np.float64)}
    y = np.arange(n, dtype=np.float64) + 1.0
    seen_by_predictor: dict[int, set[int]] = {}

    def fit_predict(train: Columns, actual: np.ndarray, asked: Columns) -> np.ndarray:
        trained = set(train["row"].astype(int).tolist())
        for row in asked["row"].astype(int):
            seen_by_predictor[int(row)] = trained
        return np.full(len(asked["row"]), float(actual.mean()))

    predicted = out_of_fold(fit_predict, columns, y, fold_ids(n))
    assert sorted(seen_by_predictor) == list(range(n))
    assert all(row not in trained for row, trained in seen_by_predictor.items())
    assert all(len(trained) >= n - n // FOLDS - 1 for trained in seen_by_predictor.values())
    for row in range(n):  # the mean of the rows its model saw
        assert predicted[row] == pytest.approx(np.mean([y[i] for i in seen_by_predictor[row]]))


def test_the_offset_is_the_finite_sample_conformal_quantile() -> None:
    scores = np.arange(100, dtype=np.float64) / 100  # 0.00 .. 0.99
    # ceil(101 * 0.9) = 91st smallest
    assert conformal_offset(scores, 0.9) == pytest.approx(0.90)
    assert conformal_offset(scores[: MIN_OOF_ROWS - 1], 0.9) == 0.0
    assert conformal_offset(np.full(200, 50.0), 0.9) == MAX_ABS_LOG_OFFSET


def test_log_scores_make_the_factor_scale_free() -> None:
    actual = np.array([10.0, 1000.0])
    assert log_scores(actual, actual / 2) == pytest.approx([np.log(2), np.log(2)])


def test_offset_of_a_constant_predictor_is_the_lognormal_quantile() -> None:
    rng = np.random.default_rng(0)
    actual = np.exp(rng.normal(0.0, 1.0, 20_000))  # log-normal: its p90 is e^1.2816
    offset = conformal_offset(log_scores(actual, np.ones_like(actual)), 0.9)
    assert offset == pytest.approx(1.2816, abs=0.03)
    fresh = np.exp(rng.normal(0.0, 1.0, 20_000))
    assert np.mean(fresh <= math.exp(offset)) == pytest.approx(0.9, abs=0.01)


@pytest.mark.parametrize("bias", [0.5, 1.0, 2.0])
def test_a_biased_model_is_corrected_to_the_requested_coverage(bias: float) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(10, 1000, 4000)
    actual = x * np.exp(rng.normal(0.0, 0.3, len(x)))
    predicted = bias * x  # right shape, wrong scale
    offset = conformal_offset(log_scores(actual[:2000], predicted[:2000]), 0.9)
    coverage = np.mean(actual[2000:] <= predicted[2000:] * math.exp(offset))
    assert coverage == pytest.approx(0.9, abs=0.03)
