"""Accuracy of a quantile prediction (evaluate, pinball_loss, regime_coverage), and a fit
scored on held-out rows as the prediction servers will answer (score_held_out). No I/O.

What a server answers is computed by the serving code itself (shared.served): the compiled
walk where the servers use it, the space's way back to ms, the calibration factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shared.backends import Backend
from shared.features import FEATURES, Columns, build_matrix, normalized_pod_class
from shared.served import answer_ms, calibration_scale, model_output
from training_server.retrain.fit import TargetFit


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
    columns: Columns, y_true: np.ndarray, y_pred: np.ndarray, quantile: float | None = None
) -> dict[str, dict[str, float | int]]:
    """Coverage per regime where a p90 is most likely to be off: queued or not, pod role,
    prefix-cache score quarter. Only regimes with rows appear: {name: {n, coverage}}.
    Then one regime per hardware class among the rows (`pod_class=h200`: the labels the
    store reads with them, normalised; rows without a class have none), which also carries
    the pinball loss in ms at `quantile` when given: {n, coverage, pinball_loss}."""
    regimes = _fixed_regimes(columns, y_true <= y_pred)
    for name, mask in _class_masks(columns).items():
        entry: dict[str, float | int] = {"n": int(mask.sum())}
        entry["coverage"] = float((y_true[mask] <= y_pred[mask]).mean())
        if quantile is not None:
            entry["pinball_loss"] = pinball_loss(y_true[mask], y_pred[mask], quantile)
        regimes[f"pod_class={name}"] = entry
    return regimes


def _class_masks(columns: Columns) -> dict[str, np.ndarray]:
    labels = columns.get("pod_class")
    if labels is None or not len(labels):
        return {}
    names = np.array([normalized_pod_class(v) for v in labels.tolist()], dtype=object)
    return {name: names == name for name in sorted(set(names.tolist())) if name}


def _fixed_regimes(columns: Columns, covered: np.ndarray) -> dict[str, dict[str, float | int]]:
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


@dataclass(frozen=True)
class Answers:
    """A fit's answers in ms to some rows: before its calibration factor, and as served."""

    uncalibrated: np.ndarray
    served: np.ndarray


def answers(backend: Backend, fit: TargetFit, columns: Columns) -> Answers:
    """What a prediction server answers with `fit` (before any live correction), and the
    same before the fit's factor (`fit` must have a model)."""
    matrix = build_matrix(columns, fit.features)
    output = model_output(backend, fit.model, fit.compiled, matrix)
    return Answers(
        uncalibrated=answer_ms(fit.space, columns, output, 1.0),
        served=answer_ms(fit.space, columns, output, calibration_scale(fit.log_offset)),
    )


def served_ms(backend: Backend, fit: TargetFit, columns: Columns) -> np.ndarray:
    """What a prediction server answers with this fit (before any live correction)."""
    return answers(backend, fit, columns).served


def score_held_out(
    backend: Backend, fit: TargetFit, held_out: tuple[Columns, np.ndarray], quantile: float
) -> None:
    """Metrics of what the prediction servers will answer with `fit`, on rows it never saw,
    overall and per regime (into fit.metrics and fit.regimes)."""
    columns, y = held_out
    if len(y):
        answered = answers(backend, fit, columns)
        fit.metrics = evaluate(y, answered.served, quantile)
        fit.metrics["raw_coverage"] = float(np.mean(y <= answered.uncalibrated))
        fit.regimes = regime_coverage(columns, y, answered.served, quantile)
    else:
        fit.metrics = evaluate(y, y, quantile)
    fit.metrics["calibration_log_offset"] = fit.log_offset
