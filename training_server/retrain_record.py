"""The typed record of one retrain (RetrainRecord, with a TargetRecord per target), what a
retrain tick did (Outcome), and the record as a row of the retrains table and back.

The loop keeps its last success as one, the store writes and reads them as rows of the
retrains table (to_columns / from_row: the only place they become columns), the metrics
show them as labelled series, and the routes answer them as the JSON of those rows. Built by
retrain.history; no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from shared.pools import DEFAULT_POOL
from shared.targets import TARGETS, Target
from training_server.tables import retrains

# {"queued": {"n": 12, "coverage": 0.91}, "pod_type=decode": {...}, ...} of one target.
Regimes = Mapping[str, Mapping[str, float | int]]


class Outcome(StrEnum):
    """What one retrain tick did (the `status` label of latency_retrains_total); a recorded
    retrain is OK or FAILED (the `status` column)."""

    OK = "ok"  # a new bundle is published and recorded
    SKIPPED = "skipped"  # no new samples, or not enough yet for any model
    FAILED = "failed"  # recorded with its error; the previous bundle keeps serving
    FOLLOWER = "follower"  # another replica leads: not a retrain, not counted


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


NO_TARGET = TargetRecord()


@dataclass(frozen=True)
class RetrainRecord:
    """One retrain, successful or failed (`status` OK or FAILED), by replica `trainer`."""

    started_at: datetime
    duration_s: float
    status: Outcome
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


# Columns of the retrains table: a RetrainRecord field each (but the targets), and per
# target a TargetRecord field each, named f"{target}_{field}".
RUN_COLUMNS = tuple(f.name for f in fields(RetrainRecord) if f.name != "targets")
PER_TARGET_COLUMNS = tuple(f.name for f in fields(TargetRecord))


def _aware(value: Any) -> Any:
    """SQLite hands back naive datetimes; every time we store is UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def to_columns(record: RetrainRecord) -> dict[str, Any]:
    """The retrains-table row of `record`: every column but the key, in the table's order
    (also the JSON of a retrain). The one place a retrain becomes per-target columns."""
    values = {name: getattr(record, name) for name in RUN_COLUMNS}
    values["status"] = record.status.value
    for target in TARGETS:
        scores = record.target(target)
        for name in PER_TARGET_COLUMNS:
            values[f"{target.value}_{name}"] = getattr(scores, name)
    return {c.name: values[c.name] for c in retrains.columns if c.name != "id"}


def from_row(row: Mapping[str, Any]) -> RetrainRecord:
    """The record of a retrains-table row (to_columns' inverse, with the key)."""
    row = {k: _aware(v) for k, v in row.items()}
    targets = {
        t: TargetRecord(**{name: row[f"{t.value}_{name}"] for name in PER_TARGET_COLUMNS})
        for t in TARGETS
    }
    record = RetrainRecord(targets=targets, **{name: row[name] for name in RUN_COLUMNS})
    return replace(record, status=Outcome(record.status))
