"""Fast columnar decoding of prediction rows, with pydantic as the judge of bad input.

The hot path must not build a pydantic object per row. A strict body is parsed and checked
against the contract's types and ranges in C by msgspec, straight from the bytes, then laid
out as one numpy table. msgspec is stricter than pydantic's lax parsing (no "5" for 5), so
a body it declines is not yet wrong: it goes the slow way, where pydantic either raises the
exact FastAPI-style error naming the field or accepts what lax parsing allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Annotated, Any

import msgspec
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
from shared.schemas import COUNT_MAX, PredictionRequest

_ROWS = TypeAdapter(list[PredictionRequest])


class _Unusual(Exception):
    """The fast path declines; pydantic decides."""


_REQUIRED = FRACTION_FIELDS + REQUIRED_COUNT_FIELDS
_NAMES = _REQUIRED + OPTIONAL_COUNT_FIELDS
_FRACTIONS = len(FRACTION_FIELDS)


def _fast_columns(rows: Sequence[Any]) -> Columns:
    # One table for every numeric field: numpy infers the type, and a string, null or nested
    # value makes a non-numeric table that goes to pydantic, so the fast path is never laxer
    # than the schema. Booleans are looked for first: numpy would take them as 1.0 and 0.0.
    try:
        values = [
            [r[n] for n in _REQUIRED] + [r.get(n, 0) for n in OPTIONAL_COUNT_FIELDS] for r in rows
        ]
    except (KeyError, TypeError, AttributeError) as exc:
        raise _Unusual from exc
    if any(bool in map(type, row) for row in values):
        raise _Unusual
    try:
        table = np.array(values)
    except (ValueError, OverflowError) as exc:  # a list where a number belongs: ragged table
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


_Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
_Count = Annotated[int, msgspec.Meta(ge=0, le=COUNT_MAX)]


class _StrictRow(msgspec.Struct):
    """PredictionRequest without lax coercion; fields in _NAMES order, pod_type last."""

    kv_cache_percentage: _Fraction
    prefix_cache_score: _Fraction
    input_token_length: _Count
    num_request_waiting: _Count
    num_request_running: _Count
    num_tokens_generated: _Count
    prefill_tokens_in_flight: _Count = 0
    decode_tokens_in_flight: _Count = 0
    encoder_matched_size: _Count = 0
    encoder_input_size: _Count = 0
    pod_type: str | None = ""


class _StrictBody(msgspec.Struct):
    requests: list[_StrictRow]


_STRICT_BODY = msgspec.json.Decoder(_StrictBody)
assert _StrictRow.__struct_fields__ == (*_NAMES, "pod_type")


def decode_strict_body(raw: bytes) -> Columns | None:
    """Columns of a strict-bulk body whose rows are all plainly valid; None when msgspec
    declines (bad JSON, a bad or lax-typed row, no rows): then the caller decodes it the
    slow way, for pydantic's verdict and its error."""
    try:
        rows = _STRICT_BODY.decode(raw).requests
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if not rows:
        return None
    width = len(_NAMES) + 1
    table = np.fromiter(
        chain.from_iterable(map(msgspec.structs.astuple, rows)),
        dtype=object,
        count=len(rows) * width,
    ).reshape(len(rows), width)
    numbers = table[:, :-1].astype(np.float64)
    columns: Columns = {name: numbers[:, i] for i, name in enumerate(_NAMES)}
    columns["pod_type_code"] = _pod_type_codes(table[:, -1])
    return columns


def _pod_type_codes(pod_types: np.ndarray) -> np.ndarray:
    # Few distinct labels per call (usually only ""): code each once.
    codes = {p: pod_type_code(p) for p in set(pod_types.tolist())}
    if len(codes) == 1:
        return np.full(len(pod_types), next(iter(codes.values())), dtype=np.float64)
    return np.fromiter(
        (codes[p] for p in pod_types.tolist()), dtype=np.float64, count=len(pod_types)
    )
