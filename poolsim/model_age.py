"""Keep the predictor's retrain cadence on the simulated clock when the machine lags.

At `speedup` S the trainer retrains every 10 / S wall seconds, i.e. every 10 simulated
seconds, but a retrain's own wall time d shows as d x S simulated seconds: 1.4-6 s on a
busy 2-core machine is 7-30 simulated seconds at x5, a model far staler than in a real
deployment (a retrain there takes well under a second of its 10 s interval, plus <= 1 s
for the prediction servers to load the bundle). So when the model version answering has
been served for more than `max_age_s` simulated seconds, simulated time stands still (the
engine awaits the pick) while the pick asks again every 1 / S wall seconds, until a new
version answers or `cap_s` wall seconds pass. Training rows keep flowing meanwhile, so
the new model has seen everything completed before the hold.

Holds start only after `min_rows` completions (our trainer's first model needs 100 rows
per target after its 10 % held-out share) and stop for the run after
`MAX_TIMEOUTS_IN_A_ROW` holds that saw no new version (a predictor that does not retrain).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from latency_client import Prediction

RETRAIN_S = 10.0  # the trainer's interval, simulated seconds
MAX_AGE_S = 12.0  # + 1 s to load the bundle + 1 s for the retrain itself
MIN_ROWS = 250
MAX_TIMEOUTS_IN_A_ROW = 3

Ask = Callable[[], Awaitable[list[Prediction] | None]]


@dataclass
class ModelAgeGuard:
    speedup: float
    max_age_s: float = MAX_AGE_S  # 0: never hold
    min_rows: int = MIN_ROWS
    min_cap_s: float = 10.0  # the first retrain of a fresh trainer on a busy machine: 6 s
    version: str | None = None
    since_s: float = 0.0  # simulated time the version first answered
    holds: int = 0
    hold_wall_s: float = 0.0
    timeouts_in_a_row: int = 0

    @property
    def cap_s(self) -> float:
        """A hold's wall-time limit: three retrain intervals, at least `min_cap_s`."""
        return max(self.min_cap_s, 3 * RETRAIN_S / self.speedup)

    def seen(self, version: str, now_s: float) -> None:
        if version != self.version:
            self.version, self.since_s = version, now_s

    def due(self, now_s: float, completed: int) -> bool:
        return (
            self.max_age_s > 0
            and completed >= self.min_rows
            and self.timeouts_in_a_row < MAX_TIMEOUTS_IN_A_ROW
            and now_s - self.since_s > self.max_age_s
        )

    async def hold(self, ask: Ask, now_s: float) -> list[Prediction] | None:
        """Ask until a new version answers (its predictions) or the cap passes (None)."""
        self.holds += 1
        started = time.perf_counter()
        try:
            while time.perf_counter() - started < self.cap_s:
                await asyncio.sleep(max(0.02, 1.0 / self.speedup))
                fresh = await ask()
                if fresh and fresh[0].model_version != self.version:
                    self.timeouts_in_a_row = 0
                    self.seen(fresh[0].model_version, now_s)
                    return fresh
            self.timeouts_in_a_row += 1
            self.since_s = now_s  # no new version: serve this one another max_age_s
            return None
        finally:
            self.hold_wall_s += time.perf_counter() - started

    def figures(self) -> dict[str, float]:
        return {"model_age_holds": float(self.holds), "model_age_hold_wall_s": self.hold_wall_s}
