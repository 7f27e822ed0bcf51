"""The typed record of one retrain (RetrainRecord, with a TargetRecord per target).

The loop keeps its last success as one, the store writes and reads them as rows of the
retrains table (retrain_table.to_columns / from_row: the only place they become columns), the
metrics show them as labelled series, and the routes answer them as the JSON of those rows.
Built by retrain.record; no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shared.pools import DEFAULT_POOL
from shared.targets import Target

# {"queued": {"n": 12, "coverage": 0.91}, "pod_type=decode": {...}, ...} of one target.
Regimes = Mapping[str, Mapping[str, float | int]]


@dataclass(frozen=True)
class TargetRecord:
    """One target's part of a retrain: one field per per-target column of the retrains
    table (tables.py), the same names after the target's prefix. None where nothing was
    measured: a failed retrain, no held-out or served rows, a row older than the column."""

    train_samples: int | None = None
    test_samples: int | None = None
    # Of the calibrated predictions on the newest held-out rows, as served (RETRAIN_METRICS).
    mae: float | None = None
    rmse: float | None = None
    pinball_loss: float | None = None
    coverage: float | None = None
    violation_rate: float | None = None
    # Coverage before calibration and the conformal factor shipped (log); then the p90s
    # served since the previous retrain, scored against the actuals that arrived since.
    raw_coverage: float | None = None
    calibration_log_offset: float | None = None
    live_coverage: float | None = None
    live_pinball_loss: float | None = None
    live_rows: int | None = None
    model_choice: str | None = None  # the candidate served (retrain.candidates)


@dataclass(frozen=True)
class RetrainRecord:
    """One retrain, successful or failed (`status` "ok" or "failed"), by replica `trainer`."""

    started_at: datetime
    duration_s: float
    status: str
    model_type: str
    objective: str
    quantile: float
    max_sample_id: int  # the highest sample id the retrain saw
    version: str | None = None  # the bundle published (a failure may have published one)
    error: str | None = None
    trainer: str | None = None
    window_limit: int | None = None  # newest rows per target the fit could use
    targets: Mapping[Target, TargetRecord] = field(default_factory=dict)
    # JSON columns, keyed by the target's value as stored: each target's regimes with rows,
    # and the out-of-fold pinball loss of every candidate considered (retrain.select).
    regimes: Mapping[str, Regimes] | None = None
    model_candidates: Mapping[str, Mapping[str, float]] | None = None
    pool: str = DEFAULT_POOL  # the pool whose rows it fitted (the store stamps it)
    id: int | None = None  # the store's key: None until read back from the store

    def target(self, target: Target) -> TargetRecord:
        """`target`'s part; empty (every field None) when the retrain has none."""
        return self.targets.get(target, NO_TARGET)


NO_TARGET = TargetRecord()
