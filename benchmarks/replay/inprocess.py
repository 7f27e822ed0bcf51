"""The online replay's protocol without servers or clocks, for quick A/B of choices.

Same batches, same order, same scoring and naive p90 as the online mode (online.py), but in
one process and deterministic: each row joins the held-out share with probability
LATENCY_TEST_TRAIN_RATIO (seeded); the retrainer's schedule
(training_server.retrain.schedule: the clock of `--retrain-interval / --batch-seconds` batches, and
early retrains while the data is small) is asked half-way between batches, and a retrain
it calls for fits every row sent so far (the retrainer's own train_target on the same
windows) and answers from the next batch (the prediction server loads it within a sync);
the prior answers a target until then; and the live calibration factor moves after every
batch (retrain.live_factor, as the leading trainer moves it once a second, rebased when a
new model starts answering) and applies from the next batch, as does the blend with the
level (retrain.level_blend). What it leaves out: retrain time, the retention and window
caps, sync jitter. A trace takes seconds; use the online mode for the figures that count.
The scoring is the online mode's: both naive p90s, and after the shift in a drift replay
(drift_metrics.py).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.replay.drift import Shift
from benchmarks.replay.drift_metrics import summarize_drift
from benchmarks.replay.metrics import TargetRecords, recent_naive, summarize_online
from benchmarks.trace_files import prediction_rows
from shared.backends import Backend, backend_for
from shared.features import Columns, columns_from_dicts
from shared.prior import prior_predict
from shared.schemas import PredictionRequest, TrainingEntry
from shared.settings import Calibration, TrainingSettings
from shared.targets import TARGETS, Target
from training_server.retrain.fit import TargetFit
from training_server.retrain.level_blend import BLEND_TARGETS, LevelBlend
from training_server.retrain.live_calibration import FIT_SINCE_TARGETS
from training_server.retrain.live_factor import BURST_WINDOW_TARGETS, LiveFactor
from training_server.retrain.rebase_rows import REBASE_MIN_ROWS, rebase_asks
from training_server.retrain.retrainer import FIT_SINCE_MIN_ROWS
from training_server.retrain.schedule import RetrainSchedule
from training_server.retrain.scoring import served_ms
from training_server.retrain.served_gap import ServedGap
from training_server.retrain.target import train_target

# Batches between the last row a retrain saw and the first batch its model answers.
SERVE_LAG_BATCHES = 1


@dataclass
class RetrainerFit:
    backend: Backend
    fit: TargetFit
    choice: str | None
    through: int = 0  # the newest row position sent when it was fitted (0: not known)


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
    """The retrainer's schedule (training_server.retrain.schedule) on the replay's clock: it looks
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


@dataclass
class TraceColumns:
    """One trace as the replay feeds a target: the rows as trained on and as asked about
    (without actuals), the target's actuals, which rows measure it, which are held out."""

    train: Columns
    ask: Columns
    actual: np.ndarray
    measured: np.ndarray
    held: np.ndarray


def trace_columns(
    rows: list[dict[str, Any]], target: Target, settings: TrainingSettings, seed: int
) -> TraceColumns:
    held = _held_out(len(rows), settings, seed)
    train = columns_from_dicts([TrainingEntry.model_validate(r).model_dump() for r in rows])
    ask = columns_from_dicts(
        [PredictionRequest.model_validate(r).model_dump() for r in prediction_rows(rows)]
    )
    actual = np.array([float(r.get(target.actual_field) or 0) for r in rows])
    return TraceColumns(train, ask, actual, actual > 0, held)


class TargetReplay:
    """One target, batch by batch: what is served (the prior until a trained model, then
    the model times the live factor), how it scores, and the retrains the schedule calls."""

    def __init__(
        self,
        data: TraceColumns,
        target: Target,
        settings: TrainingSettings,
        retrain_every: int,
        batch_seconds: float,
    ):
        self.data, self.target, self.settings = data, target, settings
        self.batch_seconds = batch_seconds  # the replay clock the records are timed on
        self.schedule = ReplaySchedule(retrain_every, settings.early_retrains)
        self.records = TargetRecords()
        self.retrains: list[dict[str, Any]] = []
        self.serving: RetrainerFit | None = None
        self.pending: list[tuple[int, RetrainerFit]] = []  # (first batch it answers, fit)
        q, step = settings.quantile_alpha, settings.calibration_step
        # as the leading trainer moves it
        self.live = LiveFactor(q, step, burst_window=target in BURST_WINDOW_TARGETS)
        self.gap = ServedGap(q, step)  # and its gap, on the served p90s
        self.blend = LevelBlend(q) if target in BLEND_TARGETS else None  # then the blend

    def batch(self, k: int, batch: np.ndarray, warmup: int) -> None:
        """Batch `k` (row positions `batch`): serve, score from `warmup` on, move the live
        factor, then retrain if the schedule calls for it."""
        data, q = self.data, self.settings.quantile_alpha
        while self.pending and self.pending[0][0] <= k:
            self._swap(self.pending.pop(0)[1], int(batch[0]))
        scored = batch[data.measured[batch]]
        trained, answers = self._served(scored)  # the model's times its factors
        blend = self.blend if trained else None
        served = answers if blend is None else blend.served(answers)
        start = int(batch[0])
        seen = data.actual[:start][data.measured[:start]]
        if k >= warmup and len(seen):
            naive = float(np.quantile(seen, q))
            recent, at = recent_naive(seen, q), k * self.batch_seconds
            for i, row in enumerate(scored):
                self.records.add(
                    int(row),
                    float(data.actual[row]),
                    float(served[i]),
                    naive,
                    trained,
                    naive_recent=recent,
                    seconds=at,
                )
        adaptive = self.settings.calibration is Calibration.ADAPTIVE
        if adaptive and trained and len(scored):
            # The factor scores the answers without the gap; the gap what was served; the
            # blend the answers it blends.
            without_gap = answers / math.exp(self.gap.log_offset)
            self.live.observe(data.actual[scored], without_gap, scored)
            self.gap.observe(data.actual[scored], served)
            if blend is not None:
                blend.observe(data.actual[scored], answers, scored, self.live.large_since)
        if self.schedule.due(k, int(batch[-1]) + 1):
            self._retrain(k, int(batch[-1]) + 1)

    def _served(self, scored: np.ndarray) -> tuple[bool, np.ndarray]:
        serving = self.serving
        trained = serving is not None and serving.fit.model is not None
        if serving is not None and trained:
            asked = _subset(self.data.ask, scored)
            live = math.exp(self.live.log_offset + self.gap.log_offset)
            return trained, served_ms(serving.backend, serving.fit, asked) * live
        # what the prediction server answers before a model of this target
        return trained, prior_predict(self.target, _subset(self.data.ask, scored))

    def _swap(self, fit: RetrainerFit, sent: int) -> None:
        """Serve `fit` from now on; the live factor is rebased as the leading trainer does,
        on the held-out rows sent so far that retrain.rebase_rows chooses."""
        old, self.serving = self.serving, fit
        if old is None or old.fit.model is None or fit.fit.model is None:
            return
        data = self.data
        mine = np.arange(sent)[data.measured[:sent]]
        held = mine[data.held[mine]]
        for ask in rebase_asks(self.target, self.live.level_since, old.through):
            through = sent if ask.through_id is None else ask.through_id
            rows = held[(held >= ask.since_id) & (held <= through)][-ask.limit :]
            if len(rows) >= REBASE_MIN_ROWS:
                break
        newest = _subset(data.train, rows)
        before = served_ms(old.backend, old.fit, newest)
        self.live.rebase(before, served_ms(fit.backend, fit.fit, newest), data.actual[rows])

    def _retrain(self, k: int, sent: int) -> None:
        """The retrainer's fit on every row sent so far (on those since a large shift of the
        live factor, as the retrainer does, once enough have arrived); it answers from
        batch k + lag."""
        data = self.data
        mine = np.arange(sent)[data.measured[:sent]]
        since = self.live.large_since if self.target in FIT_SINCE_TARGETS else 0
        if since:
            new = mine[mine >= since]
            if np.count_nonzero(~data.held[new]) >= FIT_SINCE_MIN_ROWS:
                mine = new
        train, test = mine[~data.held[mine]], mine[data.held[mine]]
        fit = fit_as_retrainer(
            self.settings,
            self.target,
            (_subset(data.train, train), data.actual[train]),
            (_subset(data.train, test), data.actual[test]),
        )
        fit.through = sent - 1
        self.pending.append((k + SERVE_LAG_BATCHES, fit))
        self.retrains.append(
            {
                "batch": k + 1,
                "rows": len(train),
                "choice": fit.choice,
                "log_offset": fit.fit.log_offset,
                "live": self.live.log_offset,
                "candidates": fit.fit.candidates,
            }
        )


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
    batch_seconds: float,
    shift: Shift | None,
) -> dict[str, Any]:
    n, q = len(rows), settings.quantile_alpha
    replay = TargetReplay(
        trace_columns(rows, target, settings, seed), target, settings, retrain_every, batch_seconds
    )
    for k, start in enumerate(range(0, n, per)):
        replay.batch(k, np.arange(start, min(start + per, n)), warmup)
    summary = summarize_online(replay.records, n, windows, q)
    if shift is not None:
        end_s = math.ceil(n / per) * batch_seconds
        summary["drift"] = summarize_drift(replay.records, shift, end_s, q)
    summary["retrains"] = replay.retrains
    summary["model_choices"] = _counts(r["choice"] for r in replay.retrains)
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
    name: str,
    rows: list[dict[str, Any]],
    args: Any,
    settings: TrainingSettings,
    shift: Shift | None = None,
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
                batch_seconds=args.batch_seconds,
                shift=shift,
            )
            for t in TARGETS
        },
    }
