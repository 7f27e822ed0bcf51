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
    LABEL_CODES,
    NUMERIC_FIELDS,
    Columns,
    code_column,
    columns_from_dicts,
    label_codes,
)
from shared.schemas import COUNT_MAX, REQUEST_ROW, PredictionRequest, RowField, RowKind

_ROWS = TypeAdapter(list[PredictionRequest])


class _Unusual(Exception):
    """The fast path declines; pydantic decides."""


# Everything below is derived from the row PredictionRequest declares (shared.schemas):
# the numeric fields, required ones first (the fast path reads those with r[name]), then
# the labels, each of which becomes its code column (shared.features.LABEL_CODES).
_FIELDS = {f.name: f for f in REQUEST_ROW}
_NAMES = tuple(sorted(NUMERIC_FIELDS, key=lambda n: not _FIELDS[n].required))
_REQUIRED = tuple(n for n in _NAMES if _FIELDS[n].required)
_OPTIONAL = tuple((n, _FIELDS[n].default) for n in _NAMES if not _FIELDS[n].required)
_LABELS = tuple(f.name for f in REQUEST_ROW if f.kind is RowKind.LABEL)


def _columns_of(kind: RowKind) -> slice | list[int]:
    # A slice where the kind's columns are adjacent (they are today): numpy's fancy
    # indexing with a list costs ~1.5 us a call even on a one-row table.
    found = [i for i, n in enumerate(_NAMES) if _FIELDS[n].kind is kind]
    adjacent = bool(found) and found == list(range(found[0], found[-1] + 1))
    return slice(found[0], found[-1] + 1) if adjacent else found


_FRACTION_COLUMNS = _columns_of(RowKind.FRACTION)
_COUNT_COLUMNS = _columns_of(RowKind.COUNT)


def _fast_columns(rows: Sequence[Any]) -> Columns:
    # One table for every numeric field: numpy infers the type, and a string, null or nested
    # value makes a non-numeric table that goes to pydantic, so the fast path is never laxer
    # than the schema. Booleans are looked for first: numpy would take them as 1.0 and 0.0.
    try:
        values = [
            [r[n] for n in _REQUIRED] + [r.get(n, default) for n, default in _OPTIONAL]
            for r in rows
        ]
        labels = {name: [r.get(name) for r in rows] for name in _LABELS}
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
    fractions, counts = table[:, _FRACTION_COLUMNS], table[:, _COUNT_COLUMNS]
    if not np.all((fractions >= 0.0) & (fractions <= 1.0)):  # also false for NaN
        raise _Unusual
    if not np.all((counts >= 0.0) & (counts < 2.0**63) & (counts == np.floor(counts))):
        raise _Unusual
    if not all(v is None or isinstance(v, str) for v in chain.from_iterable(labels.values())):
        raise _Unusual
    columns: Columns = {name: table[:, i] for i, name in enumerate(_NAMES)}
    for name in _LABELS:
        columns[code_column(name)] = label_codes(LABEL_CODES[name], labels[name])
    return columns


def decode_prediction_rows(rows: Sequence[Any]) -> Columns:
    """Columns for valid rows; raises pydantic.ValidationError with (index, field) locations."""
    try:
        return _fast_columns(rows)
    except _Unusual:
        validated = _ROWS.validate_python(list(rows))
        return columns_from_dicts([r.model_dump() for r in validated])


# The kinds as msgspec types: pydantic's types and ranges, without its lax coercion.
_STRICT_TYPES: dict[RowKind, Any] = {
    RowKind.FRACTION: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)],
    RowKind.COUNT: Annotated[int, msgspec.Meta(ge=0, le=COUNT_MAX)],
    RowKind.LABEL: str | None,
}


def strict_row_type(fields: Sequence[RowField]) -> type[msgspec.Struct]:
    """A msgspec Struct of these row fields, in this order (the order astuple gives).
    Keyword-only, so a required field may follow one with a default."""
    return msgspec.defstruct(
        "StrictRow",
        [
            (f.name, _STRICT_TYPES[f.kind])
            if f.required
            else (f.name, _STRICT_TYPES[f.kind], f.default)
            for f in fields
        ],
        kw_only=True,
    )


_StrictRow = strict_row_type([*(_FIELDS[n] for n in _NAMES), *(_FIELDS[n] for n in _LABELS)])
_STRICT_BODY: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    msgspec.defstruct("StrictBody", [("requests", list[_StrictRow])])  # type: ignore[valid-type]
)
# Per label: its code column, its code function, its column in the strict table.
_CODES = tuple(
    (code_column(name), LABEL_CODES[name], len(_NAMES) + i) for i, name in enumerate(_LABELS)
)


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
    width = len(_NAMES) + len(_LABELS)
    table = np.fromiter(
        chain.from_iterable(map(msgspec.structs.astuple, rows)),
        dtype=object,
        count=len(rows) * width,
    ).reshape(len(rows), width)
    numbers = table[:, : len(_NAMES)].astype(np.float64)
    columns: Columns = {name: numbers[:, i] for i, name in enumerate(_NAMES)}
    for column, code, at in _CODES:
        columns[column] = label_codes(code, table[:, at].tolist())
    return columns
