"""The hot path as named steps, with no web framework: decode -> predict -> encode.

/predict/bulk/strict decodes its body's bytes with msgspec straight into feature columns,
never into per-row objects (pydantic judges only what msgspec declines, for its exact
error); the bundle predicts both targets at once; the answer is built as bytes. /predict
and /predict/bulk take rows FastAPI already validated (a whole body, as the llm-d service
does) and share the predict and encode steps.
A single prediction is a batch of one. Bad input raises InvalidBatch, which the routes
turn into the contract's 422.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from prediction_server.errors import InvalidBatch, errors_at
from shared.decoding import decode_prediction_rows, decode_strict_body
from shared.features import Columns, columns_from_dicts
from shared.predictor import LoadedBundle
from shared.targets import Target
from shared.wire import json_bytes, model_splits, prediction_payloads, predictions_json

Predictions = dict[Target, np.ndarray]


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


def too_many(rows: int, limit: int) -> InvalidBatch:
    return InvalidBatch(
        "too_many_rows",
        [
            {
                "loc": ["body", "requests"],
                "type": "too_long",
                "input": None,
                "msg": f"at most {limit} requests per call (got {rows})",
            }
        ],
    )


def _decode_slowly(rows: list[Any]) -> Columns:
    try:
        return decode_prediction_rows(rows)
    except ValidationError as exc:
        raise InvalidBatch("invalid_row", errors_at(exc, ["body", "requests"])) from None


def _strict_rows(raw: bytes, max_rows: int) -> list[Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidBatch(
            "invalid_json",
            [
                {
                    "loc": ["body", exc.pos],
                    "type": "json_invalid",
                    "input": None,
                    "msg": f"JSON decode error: {exc.msg}",
                }
            ],
        ) from None
    rows = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(rows, list) or not rows:
        raise InvalidBatch(
            "invalid_body",
            [
                {
                    "loc": ["body", "requests"],
                    "type": "missing" if rows is None else "list_type",
                    "input": None,
                    "msg": "`requests` must be a non-empty list of prediction rows",
                }
            ],
        )
    if len(rows) > max_rows:
        raise too_many(len(rows), max_rows)
    return rows


# predict ----------------------------------------------------------------------------------
def predict(bundle: LoadedBundle, columns: Columns) -> Predictions:
    """Both targets in ms from one bundle (a caller holds one reference: never a mix)."""
    return bundle.predict(columns)


def failed_rows(predictions: Predictions, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """/predict/bulk: one error entry (index, why, the row) per valid row whose prediction
    is not a finite number (a damaged model), which its answer leaves null."""
    finite = {target: np.isfinite(values) for target, values in predictions.items()}
    failed = ~np.logical_and.reduce(list(finite.values()))
    errors = []
    for index in np.flatnonzero(failed).tolist():
        bad = ", ".join(target.value for target, ok in finite.items() if not ok[index])
        errors.append(
            {
                "index": index,
                "error": f"{bad} prediction is not a finite number",
                "request": rows[index],
            }
        )
    return errors


# encode -----------------------------------------------------------------------------------
def encode_strict(
    bundle: LoadedBundle, predictions: Predictions, rows: int, started: float
) -> bytes:
    """The strict answer as bytes: the predictions array built directly, then the counts."""
    tail = orjson.dumps(
        {
            "total_requests": rows,
            "successful_predictions": rows,
            "failed_predictions": 0,
            "processing_time_ms": (time.perf_counter() - started) * 1000.0,
            "model_version": bundle.version,
            **model_splits(bundle),
        }
    )
    return b'{"predictions":' + predictions_json(bundle, predictions) + b"," + tail[1:]


def encode_bulk(
    bundle: LoadedBundle, predictions: Predictions, errors: list[dict[str, Any]], started: float
) -> bytes:
    """Per-row answers in input order: a prediction, or null with an entry in `errors`."""
    answers: list[dict[str, Any] | None] = list(prediction_payloads(bundle, predictions))
    for error in errors:
        answers[error["index"]] = None
    return json_bytes(
        {
            "predictions": answers,
            "errors": errors,
            "total_requests": len(answers),
            "successful_predictions": len(answers) - len(errors),
            "failed_predictions": len(errors),
            "processing_time_ms": (time.perf_counter() - started) * 1000.0,
            "model_version": bundle.version,
            **model_splits(bundle),
        }
    )
