"""A retrain into the history (the retrains table): the run in progress (RetrainRun), then
its RetrainRecord (training_server.retrain_record), a success's with the live scores of the
bundle it replaces (record_ok) or a failure's (record_failed).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from shared.features import Columns
from shared.settings import TrainingSettings
from shared.targets import TARGETS, Target
from training_server.retrain.fit import TargetFit
from training_server.retrain.scoring import evaluate
from training_server.retrain_record import NO_TARGET, Outcome, RetrainRecord, TargetRecord
from training_server.store import SampleStore

# Served rows scored per retrain (the newest since the previous one are what matters).
LIVE_SCORE_ROWS = 200_000


@dataclass
class RetrainRun:
    """One retrain in progress: what each step needs to know of it."""

    started: datetime
    t0: float  # perf_counter at the start, for the duration
    watermark: int  # highest sample id this retrain sees
    window_limit: int  # rows per target it fits on
    keep_choices: bool = False  # refit each target's last choice (retrain.target.KeptChoice)
    fits: dict[Target, TargetFit] = field(default_factory=dict)
    # The training rows of each target (columns, actual ms), for the legacy files.
    windows: dict[Target, tuple[Columns, np.ndarray]] = field(default_factory=dict)

    def duration_s(self) -> float:
        return time.perf_counter() - self.t0


class PublishedNotRecorded(Exception):
    """The bundle was published (CURRENT names it, this replica serves it) but recording
    the retrain failed: a failed retrain whose model is nevertheless the one served."""

    def __init__(self, version: str, cause: BaseException):
        super().__init__(
            f"published {version}, but the retrain was not recorded: "
            f"{type(cause).__name__}: {cause}"
        )
        self.version = version


def _fitted(fit: TargetFit) -> TargetRecord:
    """What a target's fit scored on the held-out rows, and the candidate it serves."""
    m = fit.metrics
    return TargetRecord(
        train_samples=fit.train_samples,
        test_samples=fit.test_samples,
        mae=m.get("mae"),
        rmse=m.get("rmse"),
        pinball_loss=m.get("pinball_loss"),
        coverage=m.get("coverage"),
        violation_rate=m.get("violation_rate"),
        raw_coverage=m.get("raw_coverage"),
        calibration_log_offset=m.get("calibration_log_offset"),
        model_choice=fit.choice,  # which candidate won the selection
    )


def retrain_record(
    settings: TrainingSettings,
    trainer: str,
    version: str | None,
    status: Outcome,
    error: str | None,
    run: RetrainRun,
) -> RetrainRecord:
    """The record of `run` by replica `trainer` (SampleStore.record_retrain)."""
    s = settings
    return RetrainRecord(
        version=version,
        started_at=run.started,
        status=status,
        error=error,
        duration_s=run.duration_s(),
        model_type=s.model_type.value,
        objective=s.objective_type.value,
        quantile=s.quantile_alpha,
        max_sample_id=run.watermark,
        trainer=trainer,
        targets={target: _fitted(fit) for target, fit in run.fits.items()},
        model_candidates=(
            {t.value: f.candidates for t, f in run.fits.items()} if run.fits else None
        ),
    )


def live_scores(
    store: SampleStore,
    quantile: float,
    after_id: int,
    watermark: int,
    targets: Mapping[Target, TargetRecord],
) -> dict[Target, TargetRecord]:
    """`targets` with the p90s served since the previous retrain (rows after `after_id`)
    scored against the actuals that arrived since: the models that answered never saw
    these rows."""
    rows = store.served_since(after_id, limit=LIVE_SCORE_ROWS)
    keep = rows.ids <= watermark
    out = dict(targets)
    for target in TARGETS:
        actual, served = rows.scored(target, keep)
        scored = evaluate(actual, served, quantile)
        out[target] = replace(
            out.get(target, NO_TARGET),
            live_rows=len(actual),
            live_coverage=scored["coverage"],
            live_pinball_loss=scored["pinball_loss"],
        )
    return out


def record_ok(
    store: SampleStore,
    settings: TrainingSettings,
    trainer: str,
    version: str,
    run: RetrainRun,
    previous_through: int,
) -> RetrainRecord:
    """Record the retrain of a published `run`, with the live scores of the bundle it
    replaces (trained through `previous_through`); a failure here is a failed retrain whose
    bundle is nevertheless served (PublishedNotRecorded)."""
    record = retrain_record(settings, trainer, version, Outcome.OK, None, run)
    try:
        record = replace(
            record,
            targets=live_scores(
                store, settings.quantile_alpha, previous_through, run.watermark, record.targets
            ),
            window_limit=run.window_limit,
            regimes={t.value: f.regimes for t, f in run.fits.items() if f.regimes},
        )
        store.record_retrain(record)
    except Exception as exc:
        raise PublishedNotRecorded(version, exc) from exc
    return record


def record_failed(
    store: SampleStore,
    settings: TrainingSettings,
    trainer: str,
    error: Exception,
    message: str,
    run: RetrainRun,
) -> None:
    """Record a failed retrain (`message`: its error, cut to the column's 2,000 characters),
    with the version it published if it did (PublishedNotRecorded); raises what the store
    raises."""
    version = error.version if isinstance(error, PublishedNotRecorded) else None
    failed = RetrainRun(run.started, run.t0, run.watermark, run.window_limit)
    store.record_retrain(
        retrain_record(settings, trainer, version, Outcome.FAILED, message[:2000], failed)
    )
