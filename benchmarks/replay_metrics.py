"""Scoring for benchmarks/replay.py: model vs naive p90, overall, per window, second half.

Pure numpy, no I/O. A "slice" is a set of scored rows of one target; each slice reports the
same metrics for the model and for the naive predictor, and their pinball ratio
(model / naive: below 1 the model beats the naive p90).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training_server.evaluation import evaluate

METRICS = ("coverage", "pinball_loss", "mae", "rmse")


def score(actual: np.ndarray, predicted: np.ndarray, quantile: float) -> dict[str, float | None]:
    out = evaluate(actual, predicted, quantile)
    return {name: out[name] for name in METRICS}


def ratio(model: float | None, naive: float | None) -> float | None:
    if model is None or naive is None or naive == 0:
        return None
    return model / naive


def compare(
    actual: np.ndarray, model: np.ndarray, naive: np.ndarray, quantile: float
) -> dict[str, Any]:
    m, n = score(actual, model, quantile), score(actual, naive, quantile)
    return {
        "n": len(actual),
        "model": m,
        "naive": n,
        "pinball_ratio": ratio(m["pinball_loss"], n["pinball_loss"]),
    }


@dataclass
class TargetRecords:
    """Scored rows of one target, in replay order."""

    index: list[int] = field(default_factory=list)  # row position in the trace
    actual: list[float] = field(default_factory=list)
    model: list[float] = field(default_factory=list)
    naive: list[float] = field(default_factory=list)
    trained: list[bool] = field(default_factory=list)  # a trained model (not the prior) answered

    def add(self, index: int, actual: float, model: float, naive: float, trained: bool) -> None:
        self.index.append(index)
        self.actual.append(actual)
        self.model.append(model)
        self.naive.append(naive)
        self.trained.append(trained)


def summarize_online(
    records: TargetRecords, n_rows: int, windows: int, quantile: float
) -> dict[str, Any]:
    """overall, after_first_model, second_half and `windows` equal parts by row position."""
    index = np.asarray(records.index, dtype=np.int64)
    actual = np.asarray(records.actual, dtype=np.float64)
    model = np.asarray(records.model, dtype=np.float64)
    naive = np.asarray(records.naive, dtype=np.float64)
    trained = np.asarray(records.trained, dtype=bool)

    def part(mask: np.ndarray) -> dict[str, Any]:
        return compare(actual[mask], model[mask], naive[mask], quantile)

    everything = np.ones(len(index), dtype=bool)
    if trained.any():
        first = int(np.argmax(trained))  # rows are in replay order: after the first trained one
        after = np.arange(len(index)) >= first
    else:
        after = np.zeros(len(index), dtype=bool)
    edges = np.linspace(0, n_rows, windows + 1)
    return {
        "overall": part(everything),
        "after_first_model": part(after),
        "second_half": part(index >= n_rows / 2),
        "windows": [
            {"rows": [int(lo), int(hi)], **part((index >= lo) & (index < hi))}
            for lo, hi in itertools.pairwise(edges)
        ],
        "prior_answered": int((~trained).sum()),
    }


def mean_std(values: Sequence[float | None]) -> dict[str, float | None]:
    present = [v for v in values if v is not None]
    if not present:
        return {"mean": None, "std": None}
    return {"mean": float(np.mean(present)), "std": float(np.std(present))}


def aggregate_seeds(per_seed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean and std over seeds of every model/naive metric and of the pinball ratio."""
    out: dict[str, Any] = {"seeds": len(per_seed), "n_test": mean_std([s["n"] for s in per_seed])}
    for who in ("model", "naive"):
        out[who] = {m: mean_std([s[who][m] for s in per_seed]) for m in METRICS}
    out["pinball_ratio"] = mean_std([s["pinball_ratio"] for s in per_seed])
    return out


# tables ---------------------------------------------------------------------------------


def _f(value: float | None, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def _num(value: float | None) -> str:
    """Latency-sized numbers: 3 significant-ish figures without going scientific."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


HEADER = (
    f"{'target':<6} {'slice':<16} {'n':>5}  {'cov':>5} {'naive':>5}  "
    f"{'pinball':>8} {'naive':>8} {'ratio':>5}  {'MAE':>7} {'naive':>7}  "
    f"{'RMSE':>7} {'naive':>7}"
)


def table_row(target: str, label: str, part: dict[str, Any]) -> str:
    m, n = part["model"], part["naive"]
    return (
        f"{target:<6} {label:<16} {part['n']:>5}  {_f(m['coverage'], 3):>5} "
        f"{_f(n['coverage'], 3):>5}  {_num(m['pinball_loss']):>8} {_num(n['pinball_loss']):>8} "
        f"{_f(part['pinball_ratio'], 2):>5}  {_num(m['mae']):>7} {_num(n['mae']):>7}  "
        f"{_num(m['rmse']):>7} {_num(n['rmse']):>7}"
    )


def online_table(target: str, summary: dict[str, Any]) -> list[str]:
    lines = [
        table_row(target, "overall", summary["overall"]),
        table_row(target, "after 1st model", summary["after_first_model"]),
        table_row(target, "second half", summary["second_half"]),
    ]
    k = len(summary["windows"])
    for i, window in enumerate(summary["windows"]):
        lines.append(table_row(target, f"window {i + 1}/{k}", window))
    return lines


def _cov(value: float | None) -> str:
    return _f(value, 3)


def offline_row(target: str, agg: dict[str, Any]) -> str:
    def ms(who: str, metric: str, fmt: Any) -> str:
        s = agg[who][metric]
        text = fmt(s["mean"])
        return text if agg["seeds"] == 1 or s["std"] is None else f"{text}±{fmt(s['std'])}"

    r = agg["pinball_ratio"]
    ratio_text = _f(r["mean"], 2) + ("" if agg["seeds"] == 1 else f"±{_f(r['std'], 2)}")
    return (
        f"{target:<6} {_num(agg['n_test']['mean']):>5}  {ms('model', 'coverage', _cov):>11} "
        f"{ms('naive', 'coverage', _cov):>11}  {ms('model', 'pinball_loss', _num):>13} "
        f"{ms('naive', 'pinball_loss', _num):>13} {ratio_text:>9}  "
        f"{ms('model', 'mae', _num):>11} {ms('naive', 'mae', _num):>11}  "
        f"{ms('model', 'rmse', _num):>11} {ms('naive', 'rmse', _num):>11}"
    )


OFFLINE_HEADER = (
    f"{'target':<6} {'n':>5}  {'cov':>11} {'naive cov':>11}  {'pinball':>13} "
    f"{'naive':>13} {'ratio':>9}  {'MAE':>11} {'naive':>11}  {'RMSE':>11} "
    f"{'naive':>11}"
)
