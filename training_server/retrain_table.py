"""A retrain's record as a row of the retrains table, and back: the one place a
RetrainRecord becomes per-target columns (and the JSON of a retrain, which is its row)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from shared.targets import TARGETS
from training_server.retrain.records import RetrainRecord, TargetRecord
from training_server.tables import retrains


def aware(row: dict[str, Any]) -> dict[str, Any]:
    """SQLite hands back naive datetimes; every time we store is UTC."""
    return {
        k: v.replace(tzinfo=UTC) if isinstance(v, datetime) and v.tzinfo is None else v
        for k, v in row.items()
    }


# Columns of the retrains table: a RetrainRecord field each (but the targets), and per
# target a TargetRecord field each, named f"{target}_{field}".
RUN_COLUMNS = tuple(f.name for f in fields(RetrainRecord) if f.name != "targets")
PER_TARGET_COLUMNS = tuple(f.name for f in fields(TargetRecord))


def to_columns(record: RetrainRecord) -> dict[str, Any]:
    """The retrains-table row of `record`: every column but the key, in the table's order
    (also the JSON of a retrain). The one place a retrain becomes per-target columns."""
    values = {name: getattr(record, name) for name in RUN_COLUMNS}
    for target in TARGETS:
        scores = record.target(target)
        for name in PER_TARGET_COLUMNS:
            values[f"{target.value}_{name}"] = getattr(scores, name)
    return {c.name: values[c.name] for c in retrains.columns if c.name != "id"}


def from_row(row: Mapping[str, Any]) -> RetrainRecord:
    """The record of a retrains-table row (to_columns' inverse, with the key)."""
    targets = {
        t: TargetRecord(**{name: row[f"{t.value}_{name}"] for name in PER_TARGET_COLUMNS})
        for t in TARGETS
    }
    return RetrainRecord(targets=targets, **{name: row[name] for name in RUN_COLUMNS})
