"""The request row is declared once, as PredictionRequest; the hot path's strict decoder and
the feature columns are derived from it. These tests walk the declaration itself, so a field
added to it is checked with no test to update: the strict decoder must know it (decline the
row when pydantic refuses it, decode it when it is plainly valid) and, if it is a number, it
must become a column."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
import pytest
from pydantic import ValidationError

from shared.decoding import decode_prediction_rows, decode_strict_body, strict_row_type
from shared.features import NUMERIC_FIELDS
from shared.schemas import (
    COUNT_MAX,
    REQUEST_ROW,
    Count,
    Fraction,
    PodType,
    PredictionRequest,
    RowField,
    RowKind,
    TrainingEntry,
    row_fields,
)
from tests.shared.test_features import assert_same_columns, pydantic_columns

# Per kind: values the strict decoder must take as they are, and values pydantic refuses
# (so the strict decoder must decline them too). Lax forms pydantic accepts ("5" for 5) are
# left to test_strict_decoding: msgspec declines them and pydantic decides.
PLAIN: dict[RowKind, list[Any]] = {
    RowKind.FRACTION: [0.25, 0.0, 1.0, 1],
    RowKind.COUNT: [7, 0, COUNT_MAX],
    RowKind.LABEL: ["prefill", "", "both", None],
}
REFUSED: dict[RowKind, list[Any]] = {
    RowKind.FRACTION: [-0.1, 1.5, True, None, "x", [0.5], {}],
    RowKind.COUNT: [-1, COUNT_MAX + 1, 0.5, True, None, "x", [1], {}],
    RowKind.LABEL: [7, 0.5, True, [], {}],
}
MISSING = object()


def valid_row() -> dict[str, Any]:
    """A row with every declared field, each a plain value of its kind."""
    return {f.name: PLAIN[f.kind][0] for f in REQUEST_ROW}


def cases() -> list[Any]:
    out = []
    for f in REQUEST_ROW:
        out += [pytest.param(f, v, id=f"{f.name}={v!r}") for v in PLAIN[f.kind] + REFUSED[f.kind]]
        out.append(pytest.param(f, MISSING, id=f"{f.name}-missing"))
    return out


def test_the_row_is_every_field_of_the_wire_model() -> None:
    assert [f.name for f in REQUEST_ROW] == list(PredictionRequest.model_fields)
    assert set(PredictionRequest.model_fields) <= set(TrainingEntry.model_fields)
    assert set(NUMERIC_FIELDS) == {f.name for f in REQUEST_ROW if f.kind is not RowKind.LABEL}


@pytest.mark.parametrize(("field", "value"), cases())
def test_every_declared_field_is_judged_alike_by_pydantic_and_the_strict_decoder(
    field: RowField, value: Any
) -> None:
    row = valid_row()
    if value is MISSING:
        del row[field.name]
    else:
        row[field.name] = value
    rows = [valid_row(), row]
    try:
        PredictionRequest.model_validate(row)
    except ValidationError as exc:
        assert [e["loc"] for e in exc.errors()] == [(field.name,)]
        assert decode_strict_body(orjson.dumps({"requests": rows})) is None
        with pytest.raises(ValidationError) as caught:
            decode_prediction_rows(rows)
        assert [e["loc"] for e in caught.value.errors()] == [(1, field.name)]
        return
    assert value is MISSING or value in PLAIN[field.kind], "pydantic accepted a refused value"
    want = pydantic_columns(rows)
    got = decode_strict_body(orjson.dumps({"requests": rows}))
    assert got is not None, "the strict decoder declined a plainly valid row"
    assert_same_columns(got, want)
    assert_same_columns(decode_prediction_rows(rows), want)


class _Wider(PredictionRequest):
    """The row with fields added: one of each kind, required and defaulted."""

    queue_share: Fraction
    batch_tokens: Count = 3
    tenant: PodType = ""


WIDER = row_fields(_Wider)
WIDER_ROWS = msgspec.json.Decoder(list[strict_row_type(WIDER)])  # type: ignore[misc]


def wider_row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {**valid_row(), "queue_share": 0.5, "batch_tokens": 9, "tenant": "a"}
    row.update(changes)
    return {k: v for k, v in row.items() if v is not MISSING}


def test_a_field_added_to_the_declaration_is_derived() -> None:
    assert [(f.name, f.kind, f.required, f.default) for f in WIDER[-3:]] == [
        ("queue_share", RowKind.FRACTION, True, None),
        ("batch_tokens", RowKind.COUNT, False, 3),
        ("tenant", RowKind.LABEL, False, ""),
    ]
    decoded = WIDER_ROWS.decode(orjson.dumps([wider_row(), wider_row(batch_tokens=MISSING)]))
    values = [msgspec.structs.asdict(r) for r in decoded]
    assert [(v["queue_share"], v["batch_tokens"], v["tenant"]) for v in values] == [
        (0.5, 9, "a"),
        (0.5, 3, "a"),
    ]
    assert _Wider.model_validate(wider_row(batch_tokens=MISSING)).batch_tokens == 3


@pytest.mark.parametrize(
    "changes",
    [
        {"queue_share": MISSING},
        {"queue_share": 1.5},
        {"queue_share": True},
        {"batch_tokens": -1},
        {"batch_tokens": "x"},
        {"tenant": 7},
    ],
    ids=repr,
)
def test_a_field_added_to_the_declaration_is_refused_by_both_when_bad(
    changes: dict[str, Any],
) -> None:
    (name,) = changes
    with pytest.raises(ValidationError) as caught:
        _Wider.model_validate(wider_row(**changes))
    assert caught.value.errors()[0]["loc"] == (name,)
    with pytest.raises(msgspec.ValidationError, match=name):
        WIDER_ROWS.decode(orjson.dumps([wider_row(**changes)]))


def test_a_row_field_without_a_kind_is_refused() -> None:
    class Unkinded(PredictionRequest):
        extra: float = 0.0

    with pytest.raises(TypeError, match=r"Unkinded\.extra"):
        row_fields(Unkinded)
