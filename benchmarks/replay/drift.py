"""The drift replay: a trace replayed `--repeat` times with every actual multiplied by
`--drift` from the halfway row on (features unchanged: the pods changed, not the traffic),
and how the served p90s follow it.

The reference is a naive p90 of the last RECENT_NAIVE_ROWS actuals of the target sent
before the batch: it follows a shift by itself, where the running p90 of every actual never
does. After the shift: the model's coverage per DRIFT_WINDOW_S seconds of replay clock, and
over the first DRIFT_SPAN_S seconds its coverage and pinball loss against that naive p90's.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.replay.metrics import TargetRecords, ratio, score, summarize_online
from shared.targets import TARGETS

RECENT_NAIVE_ROWS = 500
DRIFT_WINDOW_S = 10.0
DRIFT_SPAN_S = 120.0


def repeated_with_drift(
    rows: Sequence[dict[str, Any]], repeat: int, factor: float | None
) -> tuple[list[dict[str, Any]], int | None]:
    """`rows` `repeat` times over, and from the halfway row on every measured actual times
    `factor`; also the first shifted row's position (None without a drift)."""
    out = [dict(r) for _ in range(repeat) for r in rows]
    if factor is None:
        return out, None
    shift = len(out) // 2
    for row in out[shift:]:
        for t in TARGETS:
            if float(row.get(t.actual_field) or 0) > 0:
                row[t.actual_field] = float(row[t.actual_field]) * factor
    return out, shift


def recent_p90(seen: Sequence[float], quantile: float) -> float | None:
    """The naive p90 of the last RECENT_NAIVE_ROWS actuals sent (None before any)."""
    if not seen:
        return None
    return float(np.quantile(np.asarray(seen[-RECENT_NAIVE_ROWS:]), quantile))


def vs_recent(records: TargetRecords, n_rows: int, windows: int, quantile: float) -> dict[str, Any]:
    """The pinball ratio against the recent naive p90, over the run and per window of rows."""
    index, actual, model, recent = _arrays(records)
    edges = np.linspace(0, n_rows, windows + 1)

    def part(mask: np.ndarray) -> float | None:
        m = score(actual[mask], model[mask], quantile)["pinball_loss"]
        n = score(actual[mask], recent[mask], quantile)["pinball_loss"]
        return ratio(m, n)

    return {
        "overall": part(np.ones(len(index), dtype=bool)),
        "windows": [part((index >= lo) & (index < hi)) for lo, hi in itertools.pairwise(edges)],
    }


def summarize_drift(
    records: TargetRecords, shift_row: int, rows_per_batch: int, batch_seconds: float, q: float
) -> dict[str, Any]:
    """Coverage per DRIFT_WINDOW_S after the shift, and the first DRIFT_SPAN_S against the
    recent naive p90 (rows are timed by their batch on the replay clock)."""
    index, actual, model, recent = _arrays(records)
    seconds = (index // rows_per_batch) * batch_seconds
    shift_s = (shift_row // rows_per_batch) * batch_seconds
    after = seconds - shift_s
    windows = []
    start = 0.0
    while (after >= start).any():
        mask = (after >= start) & (after < start + DRIFT_WINDOW_S)
        if mask.any():
            windows.append(
                {
                    "from_s": start,
                    "n": int(mask.sum()),
                    "coverage": float(np.mean(actual[mask] <= model[mask])),
                    "naive_recent_coverage": float(np.mean(actual[mask] <= recent[mask])),
                }
            )
        start += DRIFT_WINDOW_S
    span = (after >= 0) & (after < DRIFT_SPAN_S)
    m = score(actual[span], model[span], q)
    n = score(actual[span], recent[span], q)
    return {
        "shift_s": shift_s,
        "windows": windows,
        "span_s": DRIFT_SPAN_S,
        "span": {
            "n": int(span.sum()),
            "coverage": m["coverage"],
            "pinball": m["pinball_loss"],
            "naive_recent_coverage": n["coverage"],
            "naive_recent_pinball": n["pinball_loss"],
            "pinball_ratio": ratio(m["pinball_loss"], n["pinball_loss"]),
        },
    }


def target_summary(
    records: TargetRecords, n_rows: int, args: argparse.Namespace, quantile: float
) -> dict[str, Any]:
    """One target's figures: against the running p90 (summarize_online), against the
    recent one, and after the shift when the replay has one (`args.shift_row`)."""
    summary = summarize_online(records, n_rows, args.windows, quantile)
    summary["vs_naive_recent"] = vs_recent(records, n_rows, args.windows, quantile)
    if getattr(args, "shift_row", None) is not None:
        summary["drift"] = summarize_drift(
            records, args.shift_row, args.rows_per_batch, args.batch_seconds, quantile
        )
    return summary


def _arrays(records: TargetRecords) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.asarray(records.index, dtype=np.int64),
        np.asarray(records.actual, dtype=np.float64),
        np.asarray(records.model, dtype=np.float64),
        np.asarray(records.naive_recent, dtype=np.float64),
    )
