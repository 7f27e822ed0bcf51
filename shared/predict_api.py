"""The predict routes of the contract, served by the prediction server (and, for
debugging, the training server). A single prediction is a batch of one.

/predict/bulk/strict is the hot path: the body is decoded by msgspec into columns, never
into per-row pydantic objects (pydantic only judges what msgspec declines); the answer is
built straight as bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from shared.decoding import decode_prediction_rows, decode_strict_body
from shared.features import Columns, columns_from_dicts
from shared.json_body import JSONBodyRoute
from shared.predict_metrics import PredictMetrics
from shared.predictor import LoadedBundle
from shared.responses import json_bytes, prediction_payloads, predictions_json
from shared.schemas import (
    BulkPredictionEnvelope,
    BulkPredictionResponse,
    PredictionRequest,
    PredictionResponse,
)
from shared.targets import Target

# Above this many rows the tree walk takes long enough (~1 ms) to be worth a thread hop,
# so other requests on the event loop are not held up; below it the hop costs more.
THREADPOOL_MIN_ROWS = 512
_ROW = TypeAdapter(PredictionRequest)

# The route reads its body itself, so FastAPI does not document the 422 it answers.
VALIDATION_ERROR = {422: {
    "description": "Validation Error",
    "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/HTTPValidationError"}
    }},
}}

STRICT_BODY_SCHEMA = {
    "type": "object",
    "required": ["requests"],
    "properties": {
        "requests": {
            "type": "array",
            "minItems": 1,
            "items": {"$ref": "#/components/schemas/PredictionRequest"},
        }
    },
}


def _errors_at(exc: ValidationError, prefix: list[Any]) -> list[dict[str, Any]]:
    return [
        {**e, "loc": [*prefix, *e["loc"]]}
        for e in exc.errors(include_url=False, include_context=False)
    ]


def _describe(exc: ValidationError) -> str:
    """One line naming each bad field: "kv_cache_percentage: Input should be ..."."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
    )


def _too_many(n: int, limit: int) -> RequestValidationError:
    return RequestValidationError([{
        "loc": ["body", "requests"], "type": "too_long", "input": None,
        "msg": f"at most {limit} requests per call (got {n})",
    }])


async def _predictions(bundle: LoadedBundle, columns: Columns,
                       rows: int) -> dict[Target, np.ndarray]:
    if rows >= THREADPOOL_MIN_ROWS:
        return await run_in_threadpool(bundle.predict, columns)
    return bundle.predict(columns)


async def _predict(bundle: LoadedBundle, columns: Columns, rows: int) -> list[dict[str, Any]]:
    return prediction_payloads(bundle, await _predictions(bundle, columns, rows))


def build_predict_router(
    get_bundle: Callable[[Request], LoadedBundle],
    metrics: PredictMetrics,
    max_rows: int,
) -> APIRouter:
    # FastAPI parses and validates the bodies of /predict and /predict/bulk: JSONBodyRoute
    # makes every bad one a 422. The strict route reads its body itself (no wrapper there).
    router = APIRouter(tags=["predict"], route_class=JSONBodyRoute)

    @router.post("/predict", response_model=PredictionResponse)
    async def predict(row: PredictionRequest, request: Request) -> Response:
        started = time.perf_counter()
        columns = columns_from_dicts([row.model_dump()])
        payload = (await _predict(get_bundle(request), columns, 1))[0]
        body = orjson.dumps(payload)
        metrics.observe("predict", time.perf_counter() - started, 1)
        return Response(body, media_type="application/json")

    @router.post("/predict/bulk", response_model=BulkPredictionResponse)
    async def predict_bulk(envelope: BulkPredictionEnvelope, request: Request) -> Response:
        """Per-row errors: invalid rows answer null with an entry in `errors`."""
        started = time.perf_counter()
        rows = envelope.requests
        if len(rows) > max_rows:
            raise _too_many(len(rows), max_rows)
        valid: list[tuple[int, dict[str, Any]]] = []
        errors: list[dict[str, Any]] = []
        for index, raw in enumerate(rows):
            try:
                valid.append((index, _ROW.validate_python(raw).model_dump()))
            except ValidationError as exc:
                errors.append({"index": index, "error": _describe(exc), "request": raw})
        predictions: list[dict[str, Any] | None] = [None] * len(rows)
        bundle = get_bundle(request)
        if valid:
            columns = columns_from_dicts([r for _, r in valid])
            for (index, _), payload in zip(valid, await _predict(bundle, columns, len(valid)), strict=True):
                predictions[index] = payload
        if errors:
            metrics.errors.labels("bulk", "invalid_row").inc(len(errors))
        body = {
            "predictions": predictions,
            "errors": errors,
            "total_requests": len(rows),
            "successful_predictions": len(valid),
            "failed_predictions": len(errors),
            "processing_time_ms": (time.perf_counter() - started) * 1000.0,
            "model_version": bundle.version,
        }
        encoded = json_bytes(body)  # a bad row is echoed as sent: any integer, any size
        metrics.observe("bulk", time.perf_counter() - started, len(valid))
        return Response(encoded, media_type="application/json")

    @router.post(
        "/predict/bulk/strict",
        response_model=BulkPredictionResponse,
        responses=VALIDATION_ERROR,
        openapi_extra={"requestBody": {
            "required": True, "content": {"application/json": {"schema": STRICT_BODY_SCHEMA}}
        }},
    )
    async def predict_bulk_strict(request: Request) -> Response:
        """All rows or none: any invalid row answers 422 naming its index and field."""
        raw = await request.body()
        # From the complete body on: the time to receive it is the client's upload (on a
        # busy client host, its scheduling), not our processing.
        started = time.perf_counter()
        columns = decode_strict_body(raw)
        if columns is None:  # the slow way: pydantic's verdict, and its error if any
            columns = _strict_columns_slowly(raw, max_rows, metrics)
        rows = len(columns["input_token_length"])
        if rows > max_rows:
            metrics.errors.labels("strict", "too_many_rows").inc()
            raise _too_many(rows, max_rows)
        bundle = get_bundle(request)
        predictions = predictions_json(bundle, await _predictions(bundle, columns, rows))
        tail = orjson.dumps({
            "total_requests": rows,
            "successful_predictions": rows,
            "failed_predictions": 0,
            "processing_time_ms": (time.perf_counter() - started) * 1000.0,
            "model_version": bundle.version,
        })
        body = b'{"predictions":' + predictions + b"," + tail[1:]
        metrics.observe("strict", time.perf_counter() - started, rows)
        return Response(body, media_type="application/json")

    return router


def _strict_columns_slowly(raw: bytes, max_rows: int, metrics: PredictMetrics) -> Columns:
    rows = _strict_rows(raw, max_rows, metrics)
    try:
        return decode_prediction_rows(rows)
    except ValidationError as exc:
        metrics.errors.labels("strict", "invalid_row").inc()
        raise RequestValidationError(_errors_at(exc, ["body", "requests"])) from None


def _strict_rows(raw: bytes, max_rows: int, metrics: PredictMetrics) -> list[Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        metrics.errors.labels("strict", "invalid_json").inc()
        raise RequestValidationError([{
            "loc": ["body", exc.pos], "type": "json_invalid", "input": None,
            "msg": f"JSON decode error: {exc.msg}",
        }]) from None
    rows = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(rows, list) or not rows:
        metrics.errors.labels("strict", "invalid_body").inc()
        raise RequestValidationError([{
            "loc": ["body", "requests"], "type": "missing" if rows is None else "list_type",
            "input": None, "msg": "`requests` must be a non-empty list of prediction rows",
        }])
    if len(rows) > max_rows:
        metrics.errors.labels("strict", "too_many_rows").inc()
        raise _too_many(len(rows), max_rows)
    return rows
