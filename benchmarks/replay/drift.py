"""The drift replay's rows: a trace `--repeat` times over, and from the halfway row on every
actual times `--drift` with the features unchanged (the pods got slower or faster, the
traffic did not), to see how fast the served p90 follows a shift no feature explains.

Pure functions of the rows; the scoring after the shift is drift_metrics.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.targets import TARGETS


@dataclass(frozen=True)
class Shift:
    """Where a drift replay's actuals change, on the replay's clock."""

    factor: float
    row: int  # position of the first shifted row in the replayed rows
    seconds: float  # simulated time of the batch that sends it


def repeated(rows: Sequence[dict[str, Any]], times: int) -> list[dict[str, Any]]:
    """`rows` `times` over, in the same order, as copies (a drift must not reach the trace)."""
    return [dict(row) for _ in range(times) for row in rows]


def shift_row(n_rows: int) -> int:
    """The first shifted row: the halfway position of the replay."""
    return n_rows // 2


def drifted(rows: Sequence[dict[str, Any]], factor: float) -> list[dict[str, Any]]:
    """Copies of `rows`, every measured actual (> 0) times `factor` from shift_row on; an
    unmeasured target (0 or missing) stays unmeasured."""
    start = shift_row(len(rows))
    out = [dict(row) for row in rows]
    for row in out[start:]:
        for target in TARGETS:
            actual = float(row.get(target.actual_field) or 0)
            if actual > 0:
                row[target.actual_field] = actual * factor
    return out


def shift_of(n_rows: int, factor: float | None, per: int, batch_seconds: float) -> Shift | None:
    """The shift of a replay of `n_rows` rows sent `per` to a batch of `batch_seconds`
    (None without a drift)."""
    if factor is None:
        return None
    row = shift_row(n_rows)
    return Shift(factor, row, (row // per) * batch_seconds)
