"""How the served p90 follows a drift replay's shift (drift.py), on the replay clock.

Pure numpy, no I/O. From the batch that sends the first shifted row: the coverage of the
model and of the recent naive p90 (metrics.recent_naive, which follows a shift by itself
within RECENT_NAIVE_ROWS rows) per DRIFT_WINDOW_S seconds until the end of the replay, and
over the first DRIFT_SPAN_S seconds both coverages, both pinball losses and their ratio.
In process the same rows are also replayed without the drift (`with_undrifted`): a window
the trace itself makes hard is then told apart from one the shift does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.replay.drift import Shift
from benchmarks.replay.metrics import TargetRecords, ratio, score

DRIFT_WINDOW_S = 10.0  # coverage after the shift, per this many seconds of replay clock
DRIFT_SPAN_S = 120.0  # the stretch after the shift that the loss ratio is taken over


def coverage(actual: np.ndarray, predicted: np.ndarray) -> float | None:
    """Share of actuals at or below the prediction (None without rows)."""
    return float(np.mean(actual <= predicted)) if len(actual) else None


def window_starts(shift_s: float, end_s: float, width: float) -> list[float]:
    """Starts of the windows [shift_s, shift_s + width), ... that begin before `end_s`."""
    count = max(0, int(np.ceil((end_s - shift_s) / width)))
    return [shift_s + i * width for i in range(count)]


def summarize_drift(
    records: TargetRecords, shift: Shift, end_s: float, quantile: float
) -> dict[str, Any]:
    """One target after the shift. `end_s`: the replay clock after its last batch sent. A
    window without scored rows has coverage None; times in the output are since the shift."""
    seconds = np.asarray(records.seconds, dtype=np.float64)
    actual = np.asarray(records.actual, dtype=np.float64)
    model = np.asarray(records.model, dtype=np.float64)
    recent = np.asarray(records.naive_recent, dtype=np.float64)
    windows = []
    for start in window_starts(shift.seconds, end_s, DRIFT_WINDOW_S):
        mask = (seconds >= start) & (seconds < start + DRIFT_WINDOW_S)
        windows.append(
            {
                "from_s": start - shift.seconds,
                "n": int(mask.sum()),
                "coverage": coverage(actual[mask], model[mask]),
                "naive_recent_coverage": coverage(actual[mask], recent[mask]),
            }
        )
    span = (seconds >= shift.seconds) & (seconds < shift.seconds + DRIFT_SPAN_S)
    ours = score(actual[span], model[span], quantile)
    naive = score(actual[span], recent[span], quantile)
    return {
        "factor": shift.factor,
        "shift_row": shift.row,
        "shift_s": shift.seconds,
        "window_s": DRIFT_WINDOW_S,
        "windows": windows,
        "span_s": min(DRIFT_SPAN_S, max(0.0, end_s - shift.seconds)),
        "span": {
            "n": int(span.sum()),
            "coverage": ours["coverage"],
            "pinball": ours["pinball_loss"],
            "naive_recent_coverage": naive["coverage"],
            "naive_recent_pinball": naive["pinball_loss"],
            "pinball_ratio": ratio(ours["pinball_loss"], naive["pinball_loss"]),
        },
    }


def with_undrifted(drift: dict[str, Any], undrifted: dict[str, Any]) -> None:
    """Add to one target's `drift` part the coverage per window and the span's ratio of the
    same replay without the drift (`undrifted`, summarized at the same shift)."""
    for window, same in zip(drift["windows"], undrifted["windows"], strict=True):
        window["undrifted_coverage"] = same["coverage"]
    drift["span"]["undrifted_pinball_ratio"] = undrifted["span"]["pinball_ratio"]
