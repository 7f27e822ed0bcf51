"""Scoring for the replay: model vs naive p90, overall, per window, second half.

Pure numpy, no I/O. A "slice" is a set of scored rows of one target; each slice reports the
same metrics for the model and for the naive predictor, and their pinball ratio
(model / naive: below 1 the model beats the naive p90). A second naive predictor, the p90
of the newest RECENT_NAIVE_ROWS actuals, is scored beside it ("vs_naive_recent"): the
running p90 of every actual never follows a change of level, that one does.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training_server.retrain.scoring import evaluate

METRICS = ("coverage", "pinball_loss", "mae", "rmse")
# The recent naive p90 is of this many newest actuals of the target sent before the batch.
RECENT_NAIVE_ROWS = 500


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


def recent_naive(seen: Sequence[float] | np.ndarray, quantile: float) -> float:
    """The naive quantile of the newest RECENT_NAIVE_ROWS of `seen` (every actual sent
    before the batch, oldest first; at least one)."""
    newest = np.asarray(seen[-RECENT_NAIVE_ROWS:], dtype=np.float64)
    return float(np.quantile(newest, quantile))


@dataclass
class TargetRecords:
    """Scored rows of one target, in replay order."""

    index: list[int] = field(default_factory=list)  # row position in the trace
    actual: list[float] = field(default_factory=list)
    model: list[float] = field(default_factory=list)
    naive: list[float] = field(default_factory=list)
    trained: list[bool] = field(default_factory=list)  # a trained model (not the prior) answered
    naive_recent: list[float] = field(default_factory=list)  # recent_naive before the batch
    seconds: list[float] = field(default_factory=list)  # the batch's time on the replay clock

    def add(
        self,
        index: int,
        actual: float,
        model: float,
        naive: float,
        trained: bool,
        *,
        naive_recent: float,
        seconds: float,
    ) -> None:
        self.index.append(index)
        self.actual.append(actual)
        self.model.append(model)
        self.naive.append(naive)
        self.trained.append(trained)
        self.naive_recent.append(naive_recent)
        self.seconds.append(seconds)


def summarize_online(
    records: TargetRecords, n_rows: int, windows: int, quantile: float
) -> dict[str, Any]:
    """overall, after_first_model, second_half and `windows` equal parts by row position,
    against the running p90; then "vs_naive_recent", the same run, second half and windows
    against the recent naive p90."""
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
        "vs_naive_recent": vs_naive_recent(records, n_rows, windows, quantile),
    }


def vs_naive_recent(
    records: TargetRecords, n_rows: int, windows: int, quantile: float
) -> dict[str, Any]:
    """The recent naive p90's scores over the run, and the model's pinball ratio against it
    over the run, its second half and the `windows` equal parts by row position."""
    index = np.asarray(records.index, dtype=np.int64)
    actual = np.asarray(records.actual, dtype=np.float64)
    model = np.asarray(records.model, dtype=np.float64)
    recent = np.asarray(records.naive_recent, dtype=np.float64)

    def versus(mask: np.ndarray) -> float | None:
        ours = score(actual[mask], model[mask], quantile)["pinball_loss"]
        return ratio(ours, score(actual[mask], recent[mask], quantile)["pinball_loss"])

    edges = np.linspace(0, n_rows, windows + 1)
    return {
        "naive_recent": score(actual, recent, quantile),
        "overall": versus(np.ones(len(index), dtype=bool)),
        "second_half": versus(index >= n_rows / 2),
        "windows": [versus((index >= lo) & (index < hi)) for lo, hi in itertools.pairwise(edges)],
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
