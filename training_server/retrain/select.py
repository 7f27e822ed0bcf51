"""Which candidate a retrain serves for one target (select): the lowest out-of-fold pinball
loss, each candidate with its own cross-conformal factor, then the forward check.

Every candidate (retrain.candidates: the running p90, and tree models) is fitted K times
(retrain.cross_conformal.fold_ids) on the newest training rows (at most MAX_SELECTION_ROWS,
so a large store costs a bounded extra), each fold predicted by a model that never saw it.
Each candidate's out-of-fold predictions get their own conformal factor and are then scored
by pinball loss in ms, the loss the EPP pays; the lowest wins (the simpler one on a tie), so
a tree model is served only once it beats the running p90 on rows it never saw.

The cost is the tree fits (the running p90s fit no tree): 3 folds per tree candidate, and
from 500 rows the sharp candidate and the forward check's one more, so 3 tree fits per
target below 500 rows and 7 from there, where it was 10-11 with 5 folds and the sharp
candidate at every size: 50 pools of 1,000 rows (~450 per target) get their first models
in a third of the time on one core (benchmarks/README.md, bench_pools_loop.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shared.backends import Backend, FitParams
from shared.features import Columns
from shared.targets import Target
from training_server.retrain.candidates import Candidate
from training_server.retrain.cross_conformal import (
    conformal_offset,
    fold_ids,
    log_scores,
    out_of_fold,
    take,
)
from training_server.retrain.fit import fit_model, model_ms
from training_server.retrain.scoring import pinball_loss

# Out-of-fold fits use at most this many of the newest rows: enough to rank candidates and
# place a factor (1,000 scores above the p90), and the extra cost stays flat however large
# the window grows (both targets at 200k stored rows, the forward check included: 1.8-1.9 s
# on one core with 3 folds of 10,000 rows; benchmarks/README.md, bench_retrain.py).
MAX_SELECTION_ROWS = 10_000
# The forward check: the newest share of the selection rows, predicted by each finalist
# fitted on the older rows only. Interleaved folds let a tree interpolate between a row's
# neighbours in time, which the served model cannot do for the next requests: on the
# replays, trees won out of fold by 10-30 % on TPOT and lost 2 % online to the running p90.
FORWARD_SHARE = 0.2
MIN_FORWARD_ROWS = 100
# Targets whose forward check compares the finalists' shapes, not their levels: each gets
# the conformal factor of the forward rows' older half and is scored on the newer half, as
# the live factor re-levels whatever is served within ~20 rows of a shift. After a drift the
# bundle's own factors leave both finalists at the old level, and the check then served
# the one that missed least by being flat: on the chatbot trace doubled, TTFT's trees won
# out of fold by 3-10x and the p90 per queued request was served, whose shape the live
# factor chased through every queue ramp (coverage 0.60 for 10 s). TPOT keeps its
# factors: its level is followed by fitting the rows since a large shift and by the blend
# with its level, and re-levelled its drift windows fell to 0.62 (benchmarks/README.md).
RELEVELLED_FORWARD_TARGETS = frozenset({Target.TTFT})


class Scored:
    """A candidate's out-of-fold result: its conformal log factor and calibrated loss."""

    def __init__(self, candidate: Candidate, log_offset: float, pinball: float):
        self.candidate, self.log_offset, self.pinball = candidate, log_offset, pinball


def score_candidate(
    backend: Backend,
    base: FitParams,
    names: tuple[str, ...],
    candidate: Candidate,
    columns: Columns,
    y: np.ndarray,
    calibrate: bool,
) -> Scored:
    params = candidate.params(base)

    def fit_predict(cols: Columns, actual: np.ndarray, asked: Columns) -> np.ndarray:
        model = fit_model(backend, params, names, cols, actual, candidate.space)
        return model_ms(backend, model, names, candidate.space, asked)

    predicted = out_of_fold(fit_predict, columns, y, fold_ids(len(y)))
    offset = conformal_offset(log_scores(y, predicted), base.quantile) if calibrate else 0.0
    loss = pinball_loss(y, predicted * math.exp(offset), base.quantile)
    return Scored(candidate, offset, loss)


def forward_loss(
    backend: Backend,
    base: FitParams,
    names: tuple[str, ...],
    scored: Scored,
    columns: Columns,
    y: np.ndarray,
    *,
    relevel: bool = False,
) -> float:
    """`scored`'s pinball loss (with its factor) on the newest FORWARD_SHARE of the rows,
    fitted on the older ones: how it predicts requests that come after its data. With
    `relevel`, the factor is instead the conformal one of the first half of those rows,
    and the loss is on the second half (RELEVELLED_FORWARD_TARGETS)."""
    cut = len(y) - max(1, int(len(y) * FORWARD_SHARE))
    older = np.arange(len(y)) < cut
    params, space = scored.candidate.params(base), scored.candidate.space
    model = fit_model(backend, params, names, take(columns, older), y[older], space)
    predicted, actual = model_ms(backend, model, names, space, take(columns, ~older)), y[~older]
    offset = scored.log_offset
    if relevel:
        half = len(actual) // 2
        scores = log_scores(actual[:half], predicted[:half])
        offset = conformal_offset(scores, base.quantile, min_rows=1)
        predicted, actual = predicted[half:], actual[half:]
    return pinball_loss(actual, predicted * math.exp(offset), base.quantile)


def forward_check(
    backend: Backend,
    base: FitParams,
    names: tuple[str, ...],
    scored: list[Scored],
    best: Scored,
    columns: Columns,
    y: np.ndarray,
    *,
    relevel: bool = False,
) -> Scored:
    """`best`, unless it has trees and the best model without trees predicts the newest
    rows better from the older ones: where the trees lose to the level, serve the level."""
    levels = [s for s in scored if not s.candidate.has_trees]
    if not best.candidate.has_trees or not levels or len(y) * FORWARD_SHARE < MIN_FORWARD_ROWS:
        return best
    level = min(levels, key=lambda s: s.pinball)
    trees_loss = forward_loss(backend, base, names, best, columns, y, relevel=relevel)
    level_loss = forward_loss(backend, base, names, level, columns, y, relevel=relevel)
    return best if trees_loss <= level_loss else level


def newest(columns: Columns, y: np.ndarray, limit: int) -> tuple[Columns, np.ndarray]:
    keep = np.arange(len(y)) >= len(y) - limit
    return take(columns, keep), y[keep]


@dataclass(frozen=True)
class Selection:
    """One target's choice: the candidate to serve, and every candidate's result."""

    best: Scored
    scored: list[Scored]


def select(
    backend: Backend,
    base: FitParams,
    names: tuple[str, ...],
    candidates: list[Candidate],
    train: tuple[Columns, np.ndarray],
    *,
    calibrate: bool,
    relevel_forward: bool = False,
) -> Selection:
    """The candidate to serve, scored on the newest MAX_SELECTION_ROWS of `train` (oldest
    first, actuals in ms); `candidates` first = preferred on a tie. `relevel_forward`: the
    forward check compares shapes (RELEVELLED_FORWARD_TARGETS)."""
    columns, y = newest(*train, MAX_SELECTION_ROWS)
    scored = [score_candidate(backend, base, names, c, columns, y, calibrate) for c in candidates]
    best = min(scored, key=lambda s: s.pinball)  # min keeps the first of equal losses
    chosen = forward_check(backend, base, names, scored, best, columns, y, relevel=relevel_forward)
    return Selection(chosen, scored)
