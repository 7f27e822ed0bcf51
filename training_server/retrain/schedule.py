"""When the retrain loop retrains (RetrainSchedule): on its clock, earlier while the data is
small, and later after failed retrains (backoff_factor).

On the clock alone (LATENCY_RETRAINING_INTERVAL_SEC, 10 s) the first model of a new
deployment comes 10 s after its first row, and the second one fits on whatever the first
10 s brought; every minute of that is served by the cold-start prior and by models that
saw a few hundred rows. While the store is small a fit takes milliseconds, so the loop
looks every WARMUP_TICK_SEC and retrains as soon as the stored rows have doubled since the
last retrain (from MIN_ROWS: at 10, 20, 40, 80 ... rows), until a retrain has seen
WARMUP_ROWS rows; from there the clock alone decides (at the EPP's rate the doubling
would come later than the clock anyway). The row count is the newest sample id, one index
lookup, so a tick that does not retrain costs next to nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# How often the loop looks for doubled data during the warm-up.
WARMUP_TICK_SEC = 0.5
# The first early retrain: enough rows for a quantile of one target (about half each).
MIN_ROWS = 20
# Early retrains stop once one has seen this many rows (both targets together).
WARMUP_ROWS = 5_000
# Failed retrains in a row stretch the wait up to this many intervals (10 s -> 80 s).
MAX_BACKOFF = 8


def backoff_factor(failures: int) -> int:
    """The interval's multiple after `failures` failed retrains in a row: doubled per failure
    up to MAX_BACKOFF, so a broken store or disk is not hammered at full rate (1: none)."""
    factor: int = min(2 ** max(failures - 1, 0), MAX_BACKOFF)
    return factor


class RetrainSchedule:
    """Decides, at each tick of the retrain loop, whether to retrain now and how long to
    wait for the next tick. `clock` is injectable for tests (seconds, monotonic)."""

    def __init__(
        self,
        interval_sec: float,
        *,
        early: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.interval = interval_sec
        self.early = early
        self.clock = clock
        self.next_clock_at = clock() + interval_sec
        self.rows_at_last = 0  # rows stored when the last retrain started

    @property
    def warming_up(self) -> bool:
        return self.early and self.rows_at_last < WARMUP_ROWS

    def due(self, rows: int) -> bool:
        """Whether to retrain now, `rows` being stored; the caller then calls started()."""
        if self.clock() >= self.next_clock_at:
            return True
        return self.warming_up and rows >= max(MIN_ROWS, 2 * self.rows_at_last)

    def started(self, rows: int) -> None:
        """A retrain (of the loop or a manual one) starts on `rows` stored rows."""
        self.rows_at_last = max(self.rows_at_last, rows)
        self.next_clock_at = self.clock() + self.interval

    def wait(self, backoff: float = 1.0) -> float:
        """Seconds until the next tick: a warm-up tick, or the clock's (stretched by
        `backoff` after failed retrains)."""
        until_clock = max(0.0, self.next_clock_at - self.clock()) * backoff
        if self.warming_up and backoff == 1.0:
            return min(WARMUP_TICK_SEC, until_clock)
        return until_clock
