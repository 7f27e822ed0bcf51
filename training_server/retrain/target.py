"""One target's retrain (train_target): select the candidate, fit it on every row with its
cross-conformal factor, and score it on the held-out rows as the servers will answer.

The winner of retrain.select is refitted on the whole window and served with its factor.
The held-out rows (never fitted, never used to choose) score what the prediction servers
will answer (retrain.evaluate).
"""

from __future__ import annotations

import numpy as np

from shared.backends import backend_for
from shared.features import Columns, feature_names
from shared.served import compile_model
from shared.settings import Calibration, TrainingSettings
from shared.targets import Target
from training_server.retrain.candidates import candidates
from training_server.retrain.evaluate import score_held_out
from training_server.retrain.fit import MIN_ROWS_FOR_A_QUANTILE, TargetFit, fit_model, fit_params
from training_server.retrain.select import select


def train_target(
    settings: TrainingSettings,
    target: Target,
    train: tuple[Columns, np.ndarray],
    test: tuple[Columns, np.ndarray],
) -> TargetFit:
    """The fit a retrain serves for `target` from its training and held-out windows (both
    oldest first, actuals in ms); a fit without a model below MIN_ROWS_FOR_A_QUANTILE rows
    (the cold-start prior answers)."""
    names = feature_names(
        target,
        token_in_flight=settings.enable_token_in_flight_features,
        encoder=settings.enable_encoder_features,
    )
    backend = backend_for(settings.model_type)
    columns, y = train
    result = TargetFit(None, names, len(y), len(test[1]))
    if len(y) < MIN_ROWS_FOR_A_QUANTILE:
        return result
    base = fit_params(settings, target, names)
    chosen = select(
        backend,
        base,
        names,
        candidates(target, settings, len(y), select=settings.model_selection),
        train,
        calibrate=settings.calibration is not Calibration.NONE,
    )
    best = chosen.best
    result.model = fit_model(
        backend, best.candidate.params(base), names, columns, y, best.candidate.space
    )
    result.compiled = compile_model(backend, result.model, len(names))
    result.space, result.log_offset = best.candidate.space, best.log_offset
    result.choice = best.candidate.name
    result.candidates = {s.candidate.name: s.pinball for s in chosen.scored}
    score_held_out(backend, result, test, settings.quantile_alpha)
    return result
