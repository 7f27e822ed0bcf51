"""The online replay's protocol without servers or clocks, for quick A/B of choices.

Same batches, same order, same scoring and naive p90 as the online mode of
benchmarks/replay.py, but in one process and deterministic: each row joins the held-out
share with probability LATENCY_TEST_TRAIN_RATIO (seeded); the retrainer's schedule
(training_server.warmup: the clock of `--retrain-interval / --batch-seconds` batches, and
early retrains while the data is small) is asked half-way between batches, and a retrain
it calls for fits every row sent so far (the retrainer's own train_target on the same
windows) and answers from the next batch (the prediction server loads it within a sync);
the prior answers a target until then; and the live calibration factor moves after every
batch (aci_step, as the leading trainer does once a second) and applies from the next
batch. What it leaves out: retrain time, the retention and window caps, sync jitter. A
trace takes seconds; use the online mode for the figures that count.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.replay_metrics import TargetRecords, summarize_online
from benchmarks.trace_files import prediction_rows
from shared.backends import Backend, backend_for
from shared.features import Columns, columns_from_dicts
from shared.prior import prior_predict
from shared.schemas import PredictionRequest, TrainingEntry
from shared.settings import Calibration, TrainingSettings
from shared.targets import TARGETS, Target
from training_server.live_calibrator import aci_step
from training_server.model_selection import train_target
from training_server.training import TargetFit, served_ms
from training_server.warmup import RetrainSchedule

# Batches between the last row a retrain saw and the first batch its model answers.
SERVE_LAG_BATCHES = 1


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
    """One target's fit exactly as the retrainer makes it from its two windows."""
    fit = train_target(settings, target, train, test)
    return RetrainerFit(backend_for(settings.model_type), fit, fit.choice)


def _subset(columns: Columns, index: np.ndarray) -> Columns:
    return {name: values[index] for name, values in columns.items()}


class ReplaySchedule:
    """The retrainer's schedule (training_server.warmup) on the replay's clock: it looks
    half-way between batches, so a retrain sees every batch sent so far and answers from
    the next one."""

    def __init__(self, interval_batches: int, early: bool):
        self.now = 0.0
        self.schedule = RetrainSchedule(
            float(interval_batches), early=early, clock=lambda: self.now
        )

    def due(self, batch: int, rows: int) -> bool:
        self.now = batch + 0.5
        if not self.schedule.due(rows):
            return False
        self.schedule.started(rows)
        return True


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
    schedule = ReplaySchedule(retrain_every, settings.early_retrains)
    records = TargetRecords()
    retrains: list[dict[str, Any]] = []
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
        if schedule.due(k, int(batch[-1]) + 1):
            train, test = mine[~held[mine]], mine[held[mine]]
            fit = fit_as_retrainer(
                settings,
                target,
                (_subset(train_cols, train), actual[train]),
                (_subset(train_cols, test), actual[test]),
            )
            pending.append((k + SERVE_LAG_BATCHES, fit))
            retrains.append(
                {
                    "batch": k + 1,
                    "rows": len(train),
                    "choice": fit.choice,
                    "log_offset": fit.fit.log_offset,
                    "live": live,
                    "candidates": fit.fit.candidates,
                }
            )
    summary = summarize_online(records, n, windows, q)
    summary["retrains"] = retrains
    summary["model_choices"] = _counts(r["choice"] for r in retrains)
    return summary


def _counts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[str(value)] = out.get(str(value), 0) + 1
    return out


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
