"""Fast columnar decoding of prediction rows, with pydantic as the judge of bad input.

The hot path must not build a pydantic object per row. We pull each field straight into a
numpy array and check the contract's ranges vectorised. Anything unusual (a missing field,
a string, a null, an out-of-range value) falls back to full pydantic validation, which either
raises the exact FastAPI-style error naming the field or accepts what lax parsing allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from shared.features import (
    FRACTION_FIELDS,
    OPTIONAL_COUNT_FIELDS,
    REQUIRED_COUNT_FIELDS,
    Columns,
    columns_from_dicts,
    pod_type_code,
)
from shared.schemas import PredictionRequest

_ROWS = TypeAdapter(list[PredictionRequest])


class _Unusual(Exception):
    """The fast path declines; pydantic decides."""


_REQUIRED = FRACTION_FIELDS + REQUIRED_COUNT_FIELDS
_NAMES = _REQUIRED + OPTIONAL_COUNT_FIELDS
_FRACTIONS = len(FRACTION_FIELDS)


def _fast_columns(rows: Sequence[Any]) -> Columns:
    # One table for every numeric field: numpy infers the type, and a string, null or nested
    # value makes a non-numeric table that goes to pydantic, so the fast path is never laxer
    # than the schema.
    try:
        table = np.array([[r[n] for n in _REQUIRED] + [r.get(n, 0) for n in OPTIONAL_COUNT_FIELDS]
                          for r in rows])
    except (KeyError, TypeError, AttributeError) as exc:
        raise _Unusual from exc
    if table.dtype.kind not in "iuf" or table.ndim != 2:
        raise _Unusual
    table = table.astype(np.float64, copy=False)
    fractions, counts = table[:, :_FRACTIONS], table[:, _FRACTIONS:]
    if not np.all((fractions >= 0.0) & (fractions <= 1.0)):  # also false for NaN
        raise _Unusual
    if not np.all((counts >= 0.0) & (counts < 2.0**63) & (counts == np.floor(counts))):
        raise _Unusual
    columns: Columns = {name: table[:, i] for i, name in enumerate(_NAMES)}
    pod_types = [r.get("pod_type") for r in rows]
    if not all(p is None or isinstance(p, str) for p in pod_types):
        raise _Unusual
    columns["pod_type_code"] = np.fromiter(
        (pod_type_code(p) for p in pod_types), dtype=np.float64, count=len(rows)
    )
    return columns


def decode_prediction_rows(rows: Sequence[Any]) -> Columns:
    """Columns for valid rows; raises pydantic.ValidationError with (index, field) locations."""
    try:
        return _fast_columns(rows)
    except _Unusual:
        validated = _ROWS.validate_python(list(rows))
        return columns_from_dicts([r.model_dump() for r in validated])
