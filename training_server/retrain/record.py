"""One retrain's record: the run in progress (RetrainRun) and its row of the retrains table,
a success's with the live scores of the bundle it replaces (record_ok) or a failure's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from shared.features import Columns
from shared.settings import TrainingSettings
from shared.targets import TARGETS, Target
from training_server.retrain.evaluate import evaluate
from training_server.retrain.fit import TargetFit
from training_server.store import SampleStore
from training_server.tables import RETRAIN_METRICS

# Served rows scored per retrain (the newest since the previous one are what matters).
LIVE_SCORE_ROWS = 200_000


@dataclass
class RetrainRun:
    """One retrain in progress: what each step needs to know of it."""

    started: datetime
    t0: float  # perf_counter at the start, for the duration
    watermark: int  # highest sample id this retrain sees
    window_limit: int  # rows per target it fits on
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


def retrain_row(
    settings: TrainingSettings,
    trainer: str,
    version: str | None,
    status: str,
    error: str | None,
    run: RetrainRun,
) -> dict[str, Any]:
    """The retrains-table row of `run` by replica `trainer` (SampleStore.record_retrain)."""
    s = settings
    row: dict[str, Any] = {
        "version": version,
        "started_at": run.started,
        "status": status,
        "error": error,
        "duration_s": run.duration_s(),
        "model_type": s.model_type.value,
        "objective": s.objective_type.value,
        "quantile": s.quantile_alpha,
        "max_sample_id": run.watermark,
        "trainer": trainer,
    }
    for target, fit in run.fits.items():
        t = target.value
        row[f"{t}_train_samples"] = fit.train_samples
        row[f"{t}_test_samples"] = fit.test_samples
        for name in (*RETRAIN_METRICS, "raw_coverage", "calibration_log_offset"):
            row[f"{t}_{name}"] = fit.metrics.get(name)
        row[f"{t}_model_choice"] = fit.choice  # which candidate won the selection
    if run.fits:
        row["model_candidates"] = {t.value: f.candidates for t, f in run.fits.items()}
    return row


def live_scores(
    store: SampleStore, quantile: float, after_id: int, watermark: int
) -> dict[str, Any]:
    """The p90s served since the previous retrain (rows after `after_id`) against the
    actuals that arrived since: the models that answered never saw these rows."""
    rows = store.served_since(after_id, limit=LIVE_SCORE_ROWS)
    keep = rows.ids <= watermark
    out: dict[str, Any] = {}
    for target in TARGETS:
        actual, served = rows.scored(target, keep)
        t = target.value
        out[f"{t}_live_rows"] = len(actual)
        scored = evaluate(actual, served, quantile)
        out[f"{t}_live_coverage"] = scored["coverage"]
        out[f"{t}_live_pinball_loss"] = scored["pinball_loss"]
    return out


def record_ok(
    store: SampleStore,
    settings: TrainingSettings,
    trainer: str,
    version: str,
    run: RetrainRun,
    previous_through: int,
) -> dict[str, Any]:
    """Record the retrains row of a published `run`, with the live scores of the bundle it
    replaces (trained through `previous_through`); a failure here is a failed retrain whose
    bundle is nevertheless served (PublishedNotRecorded)."""
    row = retrain_row(settings, trainer, version, "ok", None, run)
    try:
        row.update(
            live_scores(store, settings.quantile_alpha, previous_through, run.watermark),
            window_limit=run.window_limit,
            regimes={t.value: f.regimes for t, f in run.fits.items() if f.regimes},
        )
        store.record_retrain(row)
    except Exception as exc:
        raise PublishedNotRecorded(version, exc) from exc
    return row


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
    store.record_retrain(retrain_row(settings, trainer, version, "failed", message[:2000], failed))
