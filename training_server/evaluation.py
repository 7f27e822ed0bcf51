"""Accuracy of a quantile prediction on held-out rows. Pure numpy, no I/O."""

from __future__ import annotations

import numpy as np

from shared.features import FEATURES, Columns


def _mean(values: np.ndarray) -> float:
    """The mean of finite values, finite itself: np.mean sums first, and a sum of large
    latencies overflows (the contract bounds them only below: 1e300 ms is a valid row)."""
    return float(np.sum(values / len(values)))


def pinball_loss(y_true: np.ndarray, y_pred: np.ndarray, quantile: float) -> float:
    """Mean quantile loss: under-prediction costs `quantile`, over-prediction 1 - quantile."""
    diff = y_true - y_pred
    return _mean(np.maximum(quantile * diff, (quantile - 1.0) * diff))


def _rms(values: np.ndarray) -> float:
    """Root mean square without squaring past the float range: scaled by the largest."""
    peak = float(np.max(np.abs(values)))
    return 0.0 if peak == 0.0 else peak * float(np.sqrt(_mean((values / peak) ** 2)))


def evaluate(y_true: np.ndarray, y_pred: np.ndarray, quantile: float) -> dict[str, float | None]:
    """MAE, RMSE, pinball loss, coverage (share of actuals <= prediction) and violation rate.

    Coverage near `quantile` is the calibration check: a p90 should cover 90 % of requests.
    """
    if len(y_true) == 0:
        return {
            "mae": None,
            "rmse": None,
            "pinball_loss": None,
            "coverage": None,
            "violation_rate": None,
        }
    error = y_pred - y_true
    coverage = float(np.mean(y_true <= y_pred))
    return {
        "mae": _mean(np.abs(error)),
        "rmse": _rms(error),
        "pinball_loss": pinball_loss(y_true, y_pred, quantile),
        "coverage": coverage,
        "violation_rate": 1.0 - coverage,
    }


POD_TYPE_NAMES = {0.0: "monolithic", 1.0: "prefill", 2.0: "decode"}


def regime_coverage(
    columns: Columns, y_true: np.ndarray, y_pred: np.ndarray
) -> dict[str, dict[str, float | int]]:
    """Coverage per regime where a p90 is most likely to be off: queued or not, pod role,
    prefix-cache score quarter. Only regimes with rows appear: {name: {n, coverage}}."""
    covered = y_true <= y_pred
    masks = {
        "queued": columns["num_request_waiting"] > 0,
        "not_queued": columns["num_request_waiting"] <= 0,
        **{
            f"pod_type={name}": columns["pod_type_code"] == code
            for code, name in POD_TYPE_NAMES.items()
        },
        **{f"prefix_bucket={b}": FEATURES["prefill_score_bucket"](columns) == b for b in range(4)},
    }
    return {
        name: {"n": int(mask.sum()), "coverage": float(covered[mask].mean())}
        for name, mask in masks.items()
        if mask.any()
    }
