"""LevelBlend: one target's served p90 blended with the p90 of its newest actuals.

What is served becomes `weight * answer + (1 - weight) * level`, where `answer` is the
bundle's p90 times its factors and `level` the empirical quantile of the newest
LEVEL_ROWS actuals. Why: on the traces a decode step's time moves with load steps that no
feature explains; the model times its live factor follows them a batch late and
overshoots, while a p90 of the newest rows barely moves. Each is wrong in its own way, and
the pinball loss is convex, so their mix scores better than the better of the two: TPOT's
pinball 4-5 % (sharegpt) and 8-15 % (chatbot) under the model's alone, in process. Its
cost: where rows arrive seconds after their p90 was served (the simulator's pools), the
served p90s cover 0.01-0.03 less (benchmarks/README.md, "TPOT blended with its level").

The weight is learned online, by a projected gradient step on the blend's own pinball loss
per row (online gradient descent on a convex loss in one variable), so it leaves no choice
to a constant: where the model tells requests apart better than a level can (a queue, a
batch, a class), the gradient drives the weight to 1 and the blend to the model. The step
is scaled by the recent mean distance between the two, so it is the same on 5 ms and on
50 ms decode steps. Only TPOT is blended (BLEND_TARGETS): TTFT spans orders of magnitude
with the queue, one level is no predictor of it, and a blend lowered chatbot's TTFT
coverage to 0.87 for no gain.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from shared.live_calibration import Blend, TargetLiveCalibration
from shared.targets import Target

BLEND_TARGETS = frozenset({Target.TPOT})
# The level is the quantile of this many newest actuals (10 s of rows at 50 a second).
LEVEL_ROWS = 500
# No blend until the level rests on this many rows.
LEVEL_MIN_ROWS = 50
# Where the weight starts: neither is known to be better.
START_WEIGHT = 0.5
# The weight's gradient step per row, in units of the recent mean distance between answer
# and level: 0.1 per 50-row batch. Chosen on sharegpt's replay (0.1 against 0.3 and a
# fixed half; 0.3 follows each batch's winner and loses what the mix gains), checked on
# chatbot and on drifts of x2 and x0.5, where a fixed half does not follow the new level.
STEP_PER_ROW = 0.002


class LevelBlend:
    """One target's blend (of the pool, or of one group of rows): `observe` the actuals as
    they arrive with the answers served before the blend, then serve `weight` and
    `level_ms` (`active`: enough rows for a level)."""

    def __init__(
        self,
        quantile: float,
        weight: float = START_WEIGHT,
        level_ms: float = 0.0,
        large_since: int = 0,
    ):
        self.quantile = quantile
        self.weight = weight
        self.level_ms = level_ms  # the published level until the newest rows make one
        self._actuals: deque[float] = deque(maxlen=LEVEL_ROWS)
        self._ids: deque[int] = deque(maxlen=LEVEL_ROWS)  # each actual's row id
        self._distance: deque[float] = deque(maxlen=LEVEL_ROWS)
        self._large_since = large_since  # the factor's large shift the level restarted at

    @property
    def active(self) -> bool:
        return self.level_ms > 0.0 and self.weight < 1.0

    def served(self, answers: np.ndarray) -> np.ndarray:
        """What the blend serves for `answers` (the model's p90s times its factors)."""
        return Blend(self.weight, self.level_ms).serve(answers) if self.active else answers

    def observe(
        self, actual: np.ndarray, answers: np.ndarray, ids: np.ndarray, large_since: int = 0
    ) -> None:
        """Rows `ids` whose actuals just arrived, and what the model (times its factors)
        answers for them: step the weight on the loss of the blend served with the level so
        far, then take the actuals into the level; from `large_since` on when the factor
        found a large shift there (retrain.live_factor) since the last call."""
        keep = (actual > 0) & (answers > 0)
        actual, answers, ids = actual[keep], answers[keep], ids[keep]
        if not len(actual):
            return
        if self.level_ms > 0.0:
            difference = answers - self.level_ms
            self._distance.extend(np.abs(difference).tolist())
            scale = float(np.mean(self._distance))
            if scale > 0.0:
                blended = Blend(self.weight, self.level_ms).serve(answers)
                # d pinball / d prediction: -q below the actual, 1 - q at or above it.
                slope = np.where(actual > blended, -self.quantile, 1.0 - self.quantile)
                gradient = float(np.sum(slope * difference)) / scale
                self.weight = min(1.0, max(0.0, self.weight - STEP_PER_ROW * gradient))
        self._actuals.extend(actual.tolist())
        self._ids.extend(int(i) for i in ids)
        if large_since != self._large_since:
            self.since(large_since)
        elif len(self._actuals) >= LEVEL_MIN_ROWS:
            self._level()

    def since(self, row_id: int) -> None:
        """A large shift of the factor (retrain.live_factor) found a new level from row
        `row_id` on: the level leaves out the rows before it, which would hold it at the old
        one for LEVEL_ROWS rows (a doubling at 25 rows a second: 20 s). They are kept, as
        the factor may withdraw the shift (a burst) and give an earlier `row_id`."""
        self._large_since = row_id
        self._level()

    def _level(self) -> None:
        ids = np.fromiter(self._ids, np.int64, len(self._ids))
        actuals = np.fromiter(self._actuals, float, len(self._actuals))[ids >= self._large_since]
        if len(actuals):
            self.level_ms = float(np.quantile(actuals, self.quantile))


def resumed_blend(quantile: float, entry: TargetLiveCalibration) -> LevelBlend:
    """The blend a new leader continues from a published entry: its weight and level once
    it had a level, else a fresh start; at the factor's large shift as published."""
    if entry.blend_level_ms <= 0.0:
        return LevelBlend(quantile, large_since=entry.fit_since)
    return LevelBlend(quantile, entry.blend_weight, entry.blend_level_ms, entry.fit_since)


def published_fields(blend: LevelBlend | None) -> tuple[float, float]:
    """(blend_weight, blend_level_ms) of the entry for `blend` ((1, 0), the answer served
    alone, until it has a level)."""
    if blend is None or blend.level_ms <= 0.0:
        return 1.0, 0.0
    return blend.weight, blend.level_ms
