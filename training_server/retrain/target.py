"""One target's retrain (train_target): select the candidate, fit it on every row with its
cross-conformal factor, and score it on the held-out rows as the servers will answer.

The winner of retrain.select is refitted on the whole window and served with its factor.
The held-out rows (never fitted, never used to choose) score what the prediction servers
will answer (retrain.scoring).

The choice is most of a retrain's cost (3-7 tree fits per target, retrain.select, against
one for the refit). When the retrain loop runs behind its interval (many pools on one core,
retrain.loop) a retrain may keep the target's last choice (KeptChoice): the same
candidate, refitted on the new rows, served with the factor chosen with it; so a pool that
is waiting for its turn gets a fresh model at a fraction of the cost. The choice is made
again whenever the loop has time, and whenever the rows moved by more than KEEP_ROWS_RATIO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shared.backends import backend_for
from shared.features import Columns, carried_features, feature_names
from shared.served import compile_model
from shared.settings import Calibration, TrainingSettings
from shared.targets import TARGETS, Target
from training_server.retrain.candidates import Candidate, candidates
from training_server.retrain.fit import MIN_ROWS_FOR_A_QUANTILE, TargetFit, fit_model, fit_params
from training_server.retrain.scoring import score_held_out
from training_server.retrain.select import RELEVELLED_FORWARD_TARGETS, Scored, select
from training_server.retrain_record import RetrainRecord

# A kept choice is chosen again once the training rows grew or shrank past this ratio: two
# doublings, so that a store growing by a tenth an interval does not make every late pool
# choose again every few intervals (that would keep the loop behind).
KEEP_ROWS_RATIO = 4.0


@dataclass(frozen=True)
class KeptChoice:
    """A target's last choice: the candidate, its factor, the rows it was chosen on."""

    name: str
    log_offset: float
    rows: int


def _kept(keep: KeptChoice | None, offered: list[Candidate], rows: int) -> Scored | None:
    """The kept choice as the winner, if it is still a candidate for `rows` rows."""
    if keep is None or not keep.rows / KEEP_ROWS_RATIO <= rows <= keep.rows * KEEP_ROWS_RATIO:
        return None
    named = [c for c in offered if c.name == keep.name]
    return Scored(named[0], keep.log_offset, math.nan) if named else None


def kept_choices(record: RetrainRecord) -> dict[Target, KeptChoice]:
    """Each target's choice as a recorded retrain served it (so a restarted trainer that
    runs behind need not choose every pool's model again first)."""
    out = {}
    for target in TARGETS:
        scores = record.target(target)
        if scores.model_choice and scores.train_samples:
            offset = scores.calibration_log_offset or 0.0
            out[target] = KeptChoice(scores.model_choice, offset, scores.train_samples)
    return out


def train_target(
    settings: TrainingSettings,
    target: Target,
    train: tuple[Columns, np.ndarray],
    test: tuple[Columns, np.ndarray],
    keep: KeptChoice | None = None,
) -> TargetFit:
    """The fit a retrain serves for `target` from its training and held-out windows (both
    oldest first, actuals in ms); a fit without a model below MIN_ROWS_FOR_A_QUANTILE rows
    (the cold-start prior answers). With `keep`, that choice is refitted instead of
    choosing again (see the module docstring)."""
    columns, y = train
    # Only the features these rows carry: the bundle lists them, and a prediction server
    # from before a feature would refuse a bundle naming it (shared.features.CARRIED_ONLY).
    names = carried_features(
        feature_names(
            target,
            token_in_flight=settings.enable_token_in_flight_features,
            encoder=settings.enable_encoder_features,
        ),
        columns,
    )
    backend = backend_for(settings.model_type)
    result = TargetFit(None, names, len(y), len(test[1]))
    if len(y) < MIN_ROWS_FOR_A_QUANTILE:
        return result
    base = fit_params(settings, target, names)
    offered = candidates(target, settings, len(y), select=settings.model_selection)
    best = _kept(keep, offered, len(y))
    if best is None:
        chosen = select(
            backend,
            base,
            names,
            offered,
            train,
            calibrate=settings.calibration is not Calibration.NONE,
            relevel_forward=target in RELEVELLED_FORWARD_TARGETS,
        )
        best = chosen.best
        result.candidates = {s.candidate.name: s.pinball for s in chosen.scored}
        result.chosen_on = len(y)
    else:
        result.chosen_on = keep.rows if keep else len(y)
    result.model = fit_model(
        backend, best.candidate.params(base), names, columns, y, best.candidate.space
    )
    result.compiled = compile_model(backend, result.model, len(names))
    result.space, result.log_offset = best.candidate.space, best.log_offset
    result.choice = best.candidate.name
    score_held_out(backend, result, test, settings.quantile_alpha)
    return result
