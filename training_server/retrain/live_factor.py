"""LiveFactor: one target's live log-factor, the correction every server multiplies the
bundle's answers by (shared.live_calibration), and how it moves.

Three movements, each for a different kind of change:
- steady state, adaptive conformal inference (aci_step): up by step * q for every actual
  above its served p90, down by step * (1 - q) for every one at or below it, which keeps the
  long-run share of misses at 1 - q (Gibbs & Candes, 2021). It moves slowly on purpose: one
  row moves it by at most `step`, and by less where the scores are narrow (level_step): the
  step is meant on the quantile level, as in ACI, so that the factor's memory is at least
  about 1 / step rows whatever the latencies' spread.
- a shift (`observe`): the latency changed in a way neither the model nor the slow steps
  follow (a noisy neighbour, a throttled GPU, a new engine version). The newest rows, scored
  against the factor in force now, miss far more or far less often than 1 - q: a binomial
  tail below SHIFT_ALPHA over one of the newest SHIFT_LENGTHS rows. The factor is then set
  to the conformal quantile of those rows alone (and of every row since, for the next
  SETTLE_ROWS), and older rows are forgotten: a doubling is followed within ~20 rows, a
  halving within ~150, where the steps take ~150 and ~1,400.
  After a shift on too many misses, the rows after the window that found it replace it in
  that quantile once there are enough of them: the window was picked because its rows
  missed together, so it holds a burst's peak, where the level the next requests meet is
  often lower.
- a new bundle (`rebase`): the factor corrected the previous bundle. A retrain on rows of
  the new level moves the bundle's answers itself, and the factor on top of it would count
  the move twice (after a doubling: 4x for a minute). So the factor moves by what the new
  bundle needs less (or more) than the old one on the same held-out rows (which ones:
  retrain.rebase_rows): the difference of the two conformal quantiles of log(actual /
  answer).
  Compared at the quantile the factor serves, not at the median: a bundle that moved its
  middle but not its tail still needs the factor.

Scores are kept as log(actual / the bundle's answer): the factor that would have just
covered each row, whatever factor was served then.
"""

from __future__ import annotations

import functools
import math
from collections import deque

import numpy as np

from shared.live_calibration import MAX_LIVE_LOG_OFFSET
from shared.targets import Target

# Scores kept per target: the longest window a shift is looked for in.
RECENT_SCORES = 400
# The steps' scale (level_step): the width that holds this share of the recent scores
# around the quantile, once this many scores are kept; never below this share of `step`
# (scores all alike still move the factor).
SPREAD_MASS = 0.1
SPREAD_MIN_SCORES = 100
MIN_STEP_SHARE = 0.01
# Windows of the newest rows tested for a shift (a short one sees a jump first, a long
# one a moderate drift), and the binomial tail below which their misses say "shift".
# 8 tests a step: in a steady state a false alarm at most every ~100,000 steps (a day at
# one a second), and one only re-estimates the factor from rows at the same level. Chosen
# on the sharegpt replay without drift (1e-4 took load ramps for shifts: TPOT 1.11x naive
# in a run instead of 1.00x; 1e-8 changed nothing more) and checked on chatbot.
SHIFT_LENGTHS = (20, 30, 45, 70, 100, 150, 220, 320)
SHIFT_ALPHA = 1e-6
# After a shift the factor is the conformal quantile of every row since, until this many
# have arrived (a quantile of 20 rows is rough), then the adaptive steps take over.
SETTLE_ROWS = 200
# After a shift on too many misses, the factor leaves out the window that found the shift
# once this many rows have arrived after it (the shortest window tested). On sharegpt's
# TPOT a burst and the calmer rows after it held the factor 10-20 % above the level for
# ~15 s. Not after a shift on too few misses: its window is the calm one, and 20 rows of
# heavy-tailed TTFT after it can hold a stall that sets the factor 7x (benchmarks/README.md).
SETTLE_AFTER_WINDOW_ROWS = SHIFT_LENGTHS[0]
# The targets whose factors do so: decode steps, whose narrow scores make a burst's peak
# cost 10-20 %. TTFT's bursts are queues that last: in process it changed nothing, and the
# online runs could not tell it from noise (benchmarks/README.md).
BURST_WINDOW_TARGETS = frozenset({Target.TPOT})
# A shift that moves the factor this far (log; 1.5x) is a new level, not a load step: the
# retrains may then fit only the rows since (`large_since`; retrain.retrainer). Later large
# shifts within LARGE_SHIFT_HOLD_ROWS rows of it are the same change settling and keep
# its start, so rows since it can accumulate. A large shift on a burst's window is withdrawn
# when the rows after the window, once it is left out, put the factor back within
# LARGE_SHIFT_LOG of where it was: the level did not change, and the retrains and the
# level blend must not forget the rows before a burst (on sharegpt's TPOT at x1.2, each
# burst held the served p90 at 2x the level for 4 batches).
LARGE_SHIFT_LOG = 0.4
LARGE_SHIFT_HOLD_ROWS = 2_000


def clamp(log_offset: float) -> float:
    return float(min(MAX_LIVE_LOG_OFFSET, max(-MAX_LIVE_LOG_OFFSET, log_offset)))


def aci_step(
    log_offset: float, actual: np.ndarray, served: np.ndarray, quantile: float, step: float
) -> float:
    """The log-factor after scoring `served` against `actual` (one ACI update per row;
    their order does not matter, only the count of misses)."""
    misses = int(np.count_nonzero(actual > served))
    return clamp(log_offset + step * (misses - (1.0 - quantile) * len(actual)))


def level_step(step: float, scores: np.ndarray, quantile: float) -> float:
    """The log-factor step per row that moves the covered share by about `step`.

    ACI steps the quantile level; the factor is a log. The two agree where a tenth of the
    scores around the quantile spans 0.1 or more in log (TTFT's usually do). Decode steps
    of ~19 ms that vary by 1 % span ~0.003 there: a step of 0.005 then jumps past the
    whole top decile, the factor forgets all but the last ~8 rows, and it follows the
    level of the requests that happened to finish together (decoded in the same batches,
    their residuals are correlated) rather than of the next request, which is served now
    and finishes hundreds of rows later. So the step is carried through the density
    measured on the recent scores (SPREAD_MASS of them within the width around the
    quantile), and never exceeds `step` itself: wide scores step exactly as before."""
    if len(scores) < SPREAD_MIN_SCORES:
        return step
    low_q, high_q = max(0.0, quantile - SPREAD_MASS / 2), min(1.0, quantile + SPREAD_MASS / 2)
    low, high = np.quantile(scores, [low_q, high_q])
    scaled = step * float(high - low) / (high_q - low_q)
    return max(step * MIN_STEP_SHARE, min(step, scaled))


def conformal_log_offset(scores: np.ndarray, quantile: float) -> float:
    """The smallest factor covering a `quantile` share of `scores` with the finite-sample
    correction (rank ceil((n + 1) q) of n)."""
    ordered = np.sort(scores)
    rank = min(len(ordered), math.ceil((len(ordered) + 1) * quantile))
    return clamp(float(ordered[rank - 1]))


def binomial_tails(k: int, n: int, p: float) -> tuple[float, float]:
    """(P(X >= k), P(X <= k)) for X ~ Binomial(n, p): exact sums (n is at most a few
    hundred here, so the terms stay within a float's range)."""
    terms = [math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(n + 1)]
    return math.fsum(terms[k:]), math.fsum(terms[: k + 1])


@functools.cache
def steady_misses(n: int, quantile: float) -> tuple[int, int]:
    """The fewest and the most misses among `n` rows that a right `quantile` explains (a
    binomial tail of SHIFT_ALPHA or more); computed once per length, as the sums cost ~2 ms
    a step per target, which many pools pay every second."""
    fewest = next(k for k in range(n + 1) if binomial_tails(k, n, 1.0 - quantile)[1] >= SHIFT_ALPHA)
    most = next(
        k for k in range(n, -1, -1) if binomial_tails(k, n, 1.0 - quantile)[0] >= SHIFT_ALPHA
    )
    return fewest, most


def shift_length(scores: np.ndarray, log_offset: float, quantile: float) -> int:
    """How many of the newest `scores` (oldest first) to take as the new level: the
    shortest of SHIFT_LENGTHS whose misses under `log_offset` are too many or too few for
    the quantile (a longer one would mix in rows from before the shift), 0 when none is."""
    for n in SHIFT_LENGTHS:
        if n > len(scores):
            break
        misses = int(np.count_nonzero(scores[-n:] > log_offset))
        fewest, most = steady_misses(n, quantile)
        if not fewest <= misses <= most:
            return n
    return 0


class LiveFactor:
    """One target's live log-factor: `observe` the served answers as actuals arrive,
    `rebase` when a new bundle is served. `shifts` counts the shifts followed, and
    `level_since` is the id of the first row of the level the factor follows now (0 until
    a shift): a rebase compares bundles on rows from there on. `large_since` is the first
    row of the newest large shift's level (LARGE_SHIFT_LOG; 0: none)."""

    def __init__(
        self,
        quantile: float,
        step: float,
        log_offset: float = 0.0,
        large_since: int = 0,
        *,
        burst_window: bool = False,
    ):
        """`burst_window`: leave out the window of a shift on too many misses once rows
        after it have arrived (BURST_WINDOW_TARGETS)."""
        self.quantile, self.step = quantile, step
        self.burst_window = burst_window
        self.log_offset = log_offset
        self.shifts = 0
        self.level_since = 0
        self.large_since = large_since
        self._scores: deque[float] = deque(maxlen=RECENT_SCORES)
        self._ids: deque[int] = deque(maxlen=RECENT_SCORES)  # each score's row id
        self._rows = 0  # rows observed: the ids of callers that give none
        # Rows since the last shift: a new one needs as many new rows as the shortest test.
        self._since_shift = SHIFT_LENGTHS[0]
        self._settling = False  # the factor is re-estimated from the rows since the shift
        self._burst_rows = 0  # rows of the shift's window left out once rows follow it
        # A large shift on a burst's window, until the rows after it confirm or withdraw
        # it: (large_since, log_offset) before it.
        self._unconfirmed: tuple[int, float] | None = None

    def observe(
        self, actual: np.ndarray, served: np.ndarray, ids: np.ndarray | None = None
    ) -> bool:
        """Score answers served with the factor now in force against their actuals (rows
        `ids`, ascending) and move the factor; True when a shift was found (and followed)."""
        if ids is None:
            ids = np.arange(self._rows + 1, self._rows + 1 + len(actual))
        self._rows += len(actual)
        keep = (actual > 0) & (served > 0)
        actual, served, ids = actual[keep], served[keep], ids[keep]
        if not len(actual):
            return False
        self._scores.extend((np.log(actual / served) + self.log_offset).tolist())
        self._ids.extend(int(i) for i in ids)
        self._since_shift += len(actual)
        scores = np.fromiter(self._scores, dtype=np.float64)
        # Tested against the factor these rows were served with, before it moves on them.
        n = 0
        if self._since_shift >= SHIFT_LENGTHS[0]:
            n = shift_length(scores, self.log_offset, self.quantile)
        if n:
            self._scores = deque(scores[-n:].tolist(), maxlen=RECENT_SCORES)  # older: before
            self._ids = deque(list(self._ids)[-n:], maxlen=RECENT_SCORES)
            self.level_since = self._ids[0]
            self._since_shift, self._settling = n, True
            missed = np.count_nonzero(scores[-n:] > self.log_offset)
            high = self.burst_window and missed > (1.0 - self.quantile) * n
            self._burst_rows = n if high else 0
            self._unconfirmed = None
            self.shifts += 1
        if self._settling:
            before = self.log_offset
            since = self._since_shift
            window_left_out = since - self._burst_rows >= SETTLE_AFTER_WINDOW_ROWS
            if window_left_out:
                since -= self._burst_rows
            self.log_offset = conformal_log_offset(scores[-since:], self.quantile)
            self._settling = self._since_shift < SETTLE_ROWS
            if n and abs(self.log_offset - before) >= LARGE_SHIFT_LOG:
                self._large_shift(before)
            elif window_left_out and self._unconfirmed is not None:
                self._confirm()
        else:
            step = level_step(self.step, scores, self.quantile)
            self.log_offset = aci_step(self.log_offset, actual, served, self.quantile, step)
        return n > 0

    def _large_shift(self, before: float) -> None:
        held = self.large_since and self.level_since - self.large_since <= LARGE_SHIFT_HOLD_ROWS
        if not held:
            if self._burst_rows:
                self._unconfirmed = (self.large_since, before)
            self.large_since = self.level_since

    def _confirm(self) -> None:
        """The burst's window is left out of the factor: a large shift stands only if the
        rows after it still put the factor that far from where it was."""
        assert self._unconfirmed is not None
        large_since, before = self._unconfirmed
        self._unconfirmed = None
        if abs(self.log_offset - before) < LARGE_SHIFT_LOG:
            self.large_since = large_since

    def rebase(self, old_ms: np.ndarray, new_ms: np.ndarray, actual: np.ndarray) -> float:
        """A new bundle replaces the one the factor corrected: `old_ms` and `new_ms` are their
        answers (without the live factor) to the same newest held-out rows, whose actuals
        are `actual`. The factor moves by how much less (or more) the new bundle needs to
        cover them than the old one did; the kept scores move by the median log-ratio of
        the answers. Returns the factor's move."""
        keep = (old_ms > 0) & (new_ms > 0) & (actual > 0)
        if not keep.any():
            return 0.0
        old_ms, new_ms, actual = old_ms[keep], new_ms[keep], actual[keep]
        needed_new = conformal_log_offset(np.log(actual / new_ms), self.quantile)
        needed_old = conformal_log_offset(np.log(actual / old_ms), self.quantile)
        before = self.log_offset
        self.log_offset = clamp(before + needed_new - needed_old)
        move = float(np.median(np.log(old_ms / new_ms)))
        self._scores = deque((s + move for s in self._scores), maxlen=RECENT_SCORES)
        return self.log_offset - before
