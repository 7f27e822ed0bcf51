"""pinball_loss and evaluate against values worked out by hand on tiny arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training_server.retrain.scoring import evaluate, pinball_loss, regime_coverage

Y = np.array([1.0, 2.0, 3.0, 4.0])
PRED = np.array([2.0, 2.0, 2.0, 2.0])
METRIC_KEYS = {"mae", "rmse", "pinball_loss", "coverage", "violation_rate"}


@pytest.mark.parametrize(
    ("quantile", "expected"),
    [
        # diff = y - pred = [-1, 0, 1, 2]; loss_i = max(q*d, (q-1)*d)
        # q=0.9: [0.1, 0, 0.9, 1.8] -> sum 2.8 -> mean 0.7
        (0.9, 0.7),
        # q=0.5: [0.5, 0, 0.5, 1.0] -> sum 2.0 -> mean 0.5
        (0.5, 0.5),
        # q=0.1: [0.9, 0, 0.1, 0.2] -> sum 1.2 -> mean 0.3
        (0.1, 0.3),
    ],
)
def test_pinball_loss_by_hand(quantile: float, expected: float) -> None:
    assert pinball_loss(Y, PRED, quantile) == pytest.approx(expected)


def test_pinball_loss_under_prediction_costs_more_at_high_quantile() -> None:
    # one row, under-predicted by 10: q*10 = 9.0; over-predicted by 10: (1-q)*10 = 1.0
    assert pinball_loss(np.array([20.0]), np.array([10.0]), 0.9) == pytest.approx(9.0)
    assert pinball_loss(np.array([10.0]), np.array([20.0]), 0.9) == pytest.approx(1.0)


def test_pinball_loss_is_zero_for_perfect_predictions() -> None:
    assert pinball_loss(Y, Y.copy(), 0.9) == 0.0


def test_evaluate_by_hand() -> None:
    metrics = evaluate(Y, PRED, 0.9)
    assert set(metrics) == METRIC_KEYS
    # error = pred - y = [1, 0, -1, -2]; |error| = [1, 0, 1, 2] -> 4 / 4 = 1.0
    assert metrics["mae"] == pytest.approx(1.0)
    # error^2 = [1, 0, 1, 4] -> 6 / 4 = 1.5 -> sqrt(1.5) = 1.2247448713915890
    assert metrics["rmse"] == pytest.approx(1.2247448713915890)
    assert metrics["pinball_loss"] == pytest.approx(0.7)
    # y <= pred: [1<=2, 2<=2, 3<=2, 4<=2] = [T, T, F, F] -> 0.5
    assert metrics["coverage"] == pytest.approx(0.5)
    assert metrics["violation_rate"] == pytest.approx(0.5)


def test_evaluate_asymmetric_coverage() -> None:
    y = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    pred = np.array([15.0, 20.0, 35.0, 45.0, 40.0])
    metrics = evaluate(y, pred, 0.9)
    # error = [5, 0, 5, 5, -10]; |error| sum = 25 -> 25 / 5 = 5.0
    assert metrics["mae"] == pytest.approx(5.0)
    # error^2 = [25, 0, 25, 25, 100] = 175 -> 175 / 5 = 35 -> sqrt(35)
    assert metrics["rmse"] == pytest.approx(math.sqrt(35.0))
    # diff = y - pred = [-5, 0, -5, -5, 10]; loss = [0.5, 0, 0.5, 0.5, 9.0] = 10.5 / 5 = 2.1
    assert metrics["pinball_loss"] == pytest.approx(2.1)
    # covered: 10<=15, 20<=20, 30<=35, 40<=45 yes; 50<=40 no -> 4 / 5 = 0.8
    assert metrics["coverage"] == pytest.approx(0.8)
    assert metrics["violation_rate"] == pytest.approx(0.2)


def test_evaluate_returns_plain_floats() -> None:
    metrics = evaluate(Y, PRED, 0.9)
    assert all(type(v) is float for v in metrics.values()), metrics


def test_evaluate_perfect_prediction() -> None:
    metrics = evaluate(Y, Y.copy(), 0.9)
    assert metrics == {
        "mae": 0.0,
        "rmse": 0.0,
        "pinball_loss": 0.0,
        "coverage": 1.0,
        "violation_rate": 0.0,
    }


def test_evaluate_empty_input_gives_none_metrics() -> None:
    metrics = evaluate(np.array([]), np.array([]), 0.9)
    assert metrics == {k: None for k in METRIC_KEYS}


def test_regime_coverage_by_hand() -> None:
    columns = {
        "num_request_waiting": np.array([0.0, 0.0, 3.0, 1.0]),
        "pod_type_code": np.array([0.0, 2.0, 2.0, 0.0]),  # monolithic, decode, decode, mono
        "prefix_cache_score": np.array([0.0, 0.3, 0.6, 1.0]),  # quarters 0, 1, 2, 3
    }
    y = np.array([10.0, 20.0, 30.0, 40.0])
    pred = np.array([15.0, 10.0, 35.0, 30.0])  # covered: T, F, T, F
    regimes = regime_coverage(columns, y, pred)
    assert regimes == {
        "queued": {"n": 2, "coverage": 0.5},  # rows 2 (T) and 3 (F)
        "not_queued": {"n": 2, "coverage": 0.5},  # rows 0 (T) and 1 (F)
        "pod_type=monolithic": {"n": 2, "coverage": 0.5},
        "pod_type=decode": {"n": 2, "coverage": 0.5},  # no prefill rows: no entry
        "prefix_bucket=0": {"n": 1, "coverage": 1.0},
        "prefix_bucket=1": {"n": 1, "coverage": 0.0},
        "prefix_bucket=2": {"n": 1, "coverage": 1.0},
        "prefix_bucket=3": {"n": 1, "coverage": 0.0},
    }
