"""The hot path as named steps, with no web framework: decode -> predict -> encode.

/predict/bulk/strict decodes its body's bytes with msgspec straight into feature columns,
never into per-row objects (pydantic judges only what msgspec declines, for its exact
error); the bundle predicts both targets at once; the answer is built as bytes. /predict
and /predict/bulk take rows FastAPI already parsed and share the predict and encode steps.
A single prediction is a batch of one. Bad input raises InvalidBatch, which the routes
turn into the contract's 422.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson
from pydantic import TypeAdapter, ValidationError

from prediction_server.errors import InvalidBatch, errors_at
from shared.decoding import decode_prediction_rows, decode_strict_body
from shared.features import Columns, columns_from_dicts
from shared.predictor import LoadedBundle
from shared.schemas import PredictionRequest
from shared.targets import Target
from shared.wire import json_bytes, prediction_payloads, predictions_json

Predictions = dict[Target, np.ndarray]
_ROW = TypeAdapter(PredictionRequest)


# decode -----------------------------------------------------------------------------------
def decode_strict(raw: bytes, max_rows: int) -> Columns:
    """All rows or none: the columns of a valid body; InvalidBatch naming the first bad
    row's index and field otherwise."""
    columns = decode_strict_body(raw)
    if columns is None:  # the slow way: pydantic's verdict, and its error if any
        columns = _decode_slowly(_strict_rows(raw, max_rows))
    rows = len(columns["input_token_length"])
    if rows > max_rows:
        raise too_many(rows, max_rows)
    return columns


def decode_rows(rows: list[dict[str, Any]]) -> Columns:
    """Rows FastAPI has validated already (model_dump of PredictionRequest)."""
    return columns_from_dicts(rows)


def split_bulk_rows(
    rows: list[Any],
) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """/predict/bulk: the valid rows with their index, and one error entry per invalid row
    (index, one line naming each bad field, the row as sent)."""
    valid: list[tuple[int, dict[str, Any]]] = []
    errors: list[dict[str, Any]] = []
    for index, raw in enumerate(rows):
        try:
            valid.append((index, _ROW.validate_python(raw).model_dump()))
        except ValidationError as exc:
            errors.append({"index": index, "error": _describe(exc), "request": raw})
    return valid, errors


def too_many(rows: int, limit: int) -> InvalidBatch:
    return InvalidBatch("too_many_rows", [{
        "loc": ["body", "requests"], "type": "too_long", "input": None,
        "msg": f"at most {limit} requests per call (got {rows})",
    }])


def _decode_slowly(rows: list[Any]) -> Columns:
    try:
        return decode_prediction_rows(rows)
    except ValidationError as exc:
        raise InvalidBatch("invalid_row", errors_at(exc, ["body", "requests"])) from None


def _strict_rows(raw: bytes, max_rows: int) -> list[Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidBatch("invalid_json", [{
            "loc": ["body", exc.pos], "type": "json_invalid", "input": None,
            "msg": f"JSON decode error: {exc.msg}",
        }]) from None
    rows = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(rows, list) or not rows:
        raise InvalidBatch("invalid_body", [{
            "loc": ["body", "requests"], "type": "missing" if rows is None else "list_type",
            "input": None, "msg": "`requests` must be a non-empty list of prediction rows",
        }])
    if len(rows) > max_rows:
        raise too_many(len(rows), max_rows)
    return rows


def _describe(exc: ValidationError) -> str:
    """One line naming each bad field: "kv_cache_percentage: Input should be ..."."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
    )


# predict ----------------------------------------------------------------------------------
def predict(bundle: LoadedBundle, columns: Columns) -> Predictions:
    """Both targets in ms from one bundle (a caller holds one reference: never a mix)."""
    return bundle.predict(columns)


# encode -----------------------------------------------------------------------------------
def encode_strict(bundle: LoadedBundle, predictions: Predictions, rows: int,
                  started: float) -> bytes:
    """The strict answer as bytes: the predictions array built directly, then the counts."""
    tail = orjson.dumps({
        "total_requests": rows,
        "successful_predictions": rows,
        "failed_predictions": 0,
        "processing_time_ms": (time.perf_counter() - started) * 1000.0,
        "model_version": bundle.version,
    })
    return b'{"predictions":' + predictions_json(bundle, predictions) + b"," + tail[1:]


def encode_bulk(bundle: LoadedBundle, total: int, valid: list[tuple[int, dict[str, Any]]],
                predictions: Predictions | None, errors: list[dict[str, Any]],
                started: float) -> bytes:
    """Per-row answers in input order: a prediction, or null with an entry in `errors`."""
    answers: list[dict[str, Any] | None] = [None] * total
    if predictions is not None:
        for (index, _), payload in zip(valid, prediction_payloads(bundle, predictions),
                                       strict=True):
            answers[index] = payload
    return json_bytes({  # a bad row is echoed as sent: any integer, any size
        "predictions": answers,
        "errors": errors,
        "total_requests": total,
        "successful_predictions": len(valid),
        "failed_predictions": len(errors),
        "processing_time_ms": (time.perf_counter() - started) * 1000.0,
        "model_version": bundle.version,
    })
