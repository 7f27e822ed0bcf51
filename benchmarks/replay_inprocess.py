"""The online replay's protocol without servers or clocks, for quick A/B of choices.

Same batches, same order, same scoring and naive p90 as the online mode of
benchmarks/replay.py, but in one process and deterministic: each row joins the held-out
share with probability LATENCY_TEST_TRAIN_RATIO (seeded), a retrain runs after every
`--retrain-interval / --batch-seconds` batches on every row sent so far (the retrainer's
own fit on the same windows) and answers from the batch after next (a retrain on the
clock sees the batch in flight at best, and the prediction server loads it a sync later),
and the live calibration factor moves after every batch (aci_step, as the leading trainer
does once a second) and applies from the next batch. What it leaves out: retrain time, the
retention and window caps, sync jitter. A trace takes seconds; use the online mode for
the figures that count.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.replay_metrics import TargetRecords, summarize_online
from benchmarks.traces import prediction_rows
from shared.backends import Backend, backend_for
from shared.features import Columns, columns_from_dicts, feature_names
from shared.prior import prior_predict
from shared.schemas import PredictionRequest, TrainingEntry
from shared.settings import Calibration, TrainingSettings
from shared.target_space import space_for
from shared.targets import TARGETS, Target
from training_server.live_calibrator import aci_step
from training_server.training import TargetFit, fit_params, fit_target, served_ms

# Batches between the last row a retrain saw and the first batch its model answers.
SERVE_LAG_BATCHES = 2


@dataclass
class RetrainerFit:
    backend: Backend
    fit: TargetFit
    choice: str | None


def fit_as_retrainer(
    settings: TrainingSettings,
    target: Target,
    train: tuple[Columns, np.ndarray],
    test: tuple[Columns, np.ndarray],
) -> RetrainerFit:
    """One target's fit exactly as Retrainer._retrain makes it from its two windows."""
    names = feature_names(
        target,
        token_in_flight=settings.enable_token_in_flight_features,
        encoder=settings.enable_encoder_features,
    )
    backend = backend_for(settings.model_type)
    fit = fit_target(
        backend,
        fit_params(settings, target, names),
        names,
        train,
        test,
        space=space_for(target),
        min_samples=settings.min_samples_for_retrain,
        calibrate=settings.calibration is not Calibration.NONE,
    )
    return RetrainerFit(backend, fit, None)


def _subset(columns: Columns, index: np.ndarray) -> Columns:
    return {name: values[index] for name, values in columns.items()}


class ClockSchedule:
    """Retrain every `every` batches (the retrainer's clock)."""

    def __init__(self, every: int):
        self.every = every

    def due(self, batch: int, rows: int) -> bool:
        return (batch + 1) % self.every == 0


def replay_target(
    rows: list[dict[str, Any]],
    target: Target,
    settings: TrainingSettings,
    *,
    per: int,
    retrain_every: int,
    warmup: int,
    windows: int,
    seed: int,
) -> dict[str, Any]:
    n, q = len(rows), settings.quantile_alpha
    held = _held_out(n, settings, seed)
    train_cols = columns_from_dicts([TrainingEntry.model_validate(r).model_dump() for r in rows])
    ask_cols = columns_from_dicts(
        [PredictionRequest.model_validate(r).model_dump() for r in prediction_rows(rows)]
    )
    actual = np.array([float(r.get(target.actual_field) or 0) for r in rows])
    measured = actual > 0
    adaptive = settings.calibration is Calibration.ADAPTIVE
    schedule = ClockSchedule(retrain_every)
    records = TargetRecords()
    serving: RetrainerFit | None = None
    pending: list[tuple[int, RetrainerFit]] = []  # (first batch it answers, fit)
    live = 0.0
    for k, start in enumerate(range(0, n, per)):
        while pending and pending[0][0] <= k:
            serving = pending.pop(0)[1]
        batch = np.arange(start, min(start + per, n))
        scored = batch[measured[batch]]
        trained = serving is not None and serving.fit.model is not None
        if serving is not None and trained:
            asked = _subset(ask_cols, scored)
            served = served_ms(serving.backend, serving.fit, asked) * math.exp(live)
        else:  # what the prediction server answers before a model of this target
            served = prior_predict(target, _subset(ask_cols, scored))
        seen = actual[:start][measured[:start]]
        if k >= warmup and len(seen):
            naive = float(np.quantile(seen, q))
            for i, row in enumerate(scored):
                records.add(int(row), float(actual[row]), float(served[i]), naive, trained)
        if adaptive and trained and len(scored):
            live = aci_step(live, actual[scored], served, q, settings.calibration_step)
        sent = np.arange(batch[-1] + 1)
        mine = sent[measured[sent]]
        if schedule.due(k, len(mine)):
            train, test = mine[~held[mine]], mine[held[mine]]
            fit = fit_as_retrainer(
                settings,
                target,
                (_subset(train_cols, train), actual[train]),
                (_subset(train_cols, test), actual[test]),
            )
            pending.append((k + SERVE_LAG_BATCHES, fit))
    return summarize_online(records, n, windows, q)


def _held_out(n: int, settings: TrainingSettings, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    return np.array([rng.random() < settings.test_train_ratio for _ in range(n)])


def run_inprocess(
    name: str, rows: list[dict[str, Any]], args: Any, settings: TrainingSettings
) -> dict[str, Any]:
    every = max(1, round(args.retrain_interval / args.batch_seconds))
    # The online mode's servers retrain from 50 rows; so does this.
    settings = settings.model_copy(update={"min_samples_for_retrain": 50})
    return {
        "trace": name,
        "rows": len(rows),
        "seed": args.seed,
        "batches": math.ceil(len(rows) / args.rows_per_batch),
        "targets": {
            t.value: replay_target(
                rows,
                t,
                settings,
                per=args.rows_per_batch,
                retrain_every=every,
                warmup=args.warmup_batches,
                windows=args.windows,
                seed=args.seed,
            )
            for t in TARGETS
        },
    }
