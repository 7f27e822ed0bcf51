"""ServedGap: the last live correction, stepped on the p90s the EPP actually acted on.

The live factor (retrain.live_factor) is scored on the rows as they arrive: what the bundle
answers for them now, times the factor now. The EPP acted on another number: the p90
served when its request started. A TPOT row arrives when its request ends, seconds and
hundreds of rows later, and by then the factor follows the level of the requests that
finish together (decoded in the same batches). Measured on a simulated chat pool with
prefill/decode roles: the factor covered ~0.9 of the rows as they arrived, the p90s served
0.81-0.84. And the factor's shifts and rebases reset it, so the long-run guarantee of
adaptive conformal inference does not hold for what it serves.

ServedGap is plain ACI on the served p90s themselves (each row's `predicted_*_ms` against
its actual), on the quantile level as the method defines it: a level gap `level`, moved by
every served row scored and never reset, raises the factor's level from q to q + level;
the log-offset added to the factor when serving is how far apart those two quantiles of the
recent served scores lie. Whatever the factor above it does, the long-run share of served
misses is then 1 - q as long as the gap stays within its bounds (Gibbs & Candes, 2021).
Its feedback is late (a row scores a p90 served up to ~1,000 rows earlier), and an integral
step with a delay of D rows oscillates once step * D nears 1: its step is a tenth of the
factor's (0.0005 of level at the default; step * D = 0.5 at 1,000 rows).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from shared.features import Columns
from shared.prior import prior_predict
from shared.targets import Target
from training_server.retrain.live_factor import clamp

# The gap's step per row, as a share of the factor's (the delay above).
SERVED_STEP_SHARE = 0.1
# The gap corrects the lag of a factor that is right on arrival: a few points of coverage
# (0.07-0.09 on the chat pool above). A wider one would mean the factor itself is wrong,
# which its shift test and steps are for; and ACI's asymmetric steps (up 0.9, down 0.1)
# take 10x longer to undo a burst of misses than to follow it, so the bound is also how
# far the first models' misses can push it.
MIN_LEVEL_GAP, MAX_LEVEL_GAP = -0.1, 0.09
# Served scores kept for the quantiles: enough for a level of 0.99 to be an order statistic
# of ten.
RECENT_SERVED = 1_000


def served_by_prior(target: Target, columns: Columns, served: np.ndarray) -> np.ndarray:
    """Which rows were served the cold-start prior's answer (the documented formula of their
    own features, exactly): requests the prior served keep arriving for as long as they run
    after the first trained bundle, and its misses say nothing of what the models serve.
    Told apart by value, not by a count of first rows, so the gap starts with the first row
    a model served (a skip of the first 1,000 rows left it idle for most of a replay)."""
    prior = np.maximum(prior_predict(target, columns), 0.0)
    same: np.ndarray = np.isclose(served, prior, rtol=1e-6, atol=0.0)
    return same


class ServedGap:
    """One target's (or one group's) gap: `observe` what the EPP was served as actuals
    arrive; `log_offset` is added to the live factor's when serving."""

    def __init__(
        self,
        quantile: float,
        step: float,
        level: float = 0.0,
        log_offset: float = 0.0,
    ):
        """`level` and `log_offset` as published (a new leader resuming)."""
        self.quantile = quantile
        self.step = step * SERVED_STEP_SHARE
        self.level = min(MAX_LEVEL_GAP, max(MIN_LEVEL_GAP, level))
        self.log_offset = log_offset  # until rows give the quantiles again
        # log(actual / served) without the gap's log-offset at the time: the served scores
        self._scores: deque[float] = deque(maxlen=RECENT_SERVED)

    def observe(self, actual: np.ndarray, served: np.ndarray) -> None:
        """Score the p90s `served` to the EPP by a trained model (the caller leaves out those
        of the cold-start prior: retrain.live_calibration) against their actuals."""
        keep = (actual > 0) & (served > 0)
        actual, served = actual[keep], served[keep]
        if not len(actual):
            return
        self._scores.extend((np.log(actual / served) + self.log_offset).tolist())
        misses = int(np.count_nonzero(actual > served))
        moved = self.level + self.step * (misses - (1.0 - self.quantile) * len(actual))
        self.level = min(MAX_LEVEL_GAP, max(MIN_LEVEL_GAP, moved))
        scores = np.fromiter(self._scores, dtype=np.float64)
        raised = min(1.0, max(0.0, self.quantile + self.level))  # any configured quantile
        at_level, at_q = np.quantile(scores, [raised, self.quantile])
        self.log_offset = clamp(float(at_level - at_q))  # a burst of stalls can be 100x
