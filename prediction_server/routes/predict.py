"""The predict routes: /predict/bulk/strict (the EPP's hot path), /predict/bulk, /predict.

Each handler runs the pipeline's steps (prediction_server.pipeline) and maps its
InvalidBatch to the contract's 422 here, at the edge.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError

from prediction_server import pipeline
from prediction_server.deps import MetricsDep, ServingBundle, SettingsDep
from prediction_server.errors import InvalidBatch
from shared.features import Columns
from shared.predictor import LoadedBundle
from shared.schemas import (
    BulkPredictionRequest,
    BulkPredictionResponse,
    PredictionRequest,
    PredictionResponse,
)
from shared.web.json_body import JSONBodyRoute
from shared.wire import encode_prediction

# Above this many rows the tree walk takes long enough (~1 ms) to be worth a thread hop,
# so other requests on the event loop are not held up; below it the hop costs more.
THREADPOOL_MIN_ROWS = 512

# The strict route reads its body itself, so FastAPI neither documents its body nor the
# 422 it answers: both are declared here for the OpenAPI schema.
VALIDATION_ERROR: dict[int | str, dict[str, Any]] = {
    422: {
        "description": "Validation Error",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}
        },
    }
}
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

# JSONBodyRoute: /predict and /predict/bulk are parsed by FastAPI, and every bad body is a
# 422; the strict route reads its body itself (no wrapper there).
router = APIRouter(tags=["predict"], route_class=JSONBodyRoute)


async def _predicted(bundle: LoadedBundle, columns: Columns, rows: int) -> pipeline.Predictions:
    if rows >= THREADPOOL_MIN_ROWS:
        return await run_in_threadpool(pipeline.predict, bundle, columns)
    return pipeline.predict(bundle, columns)


@router.post(
    "/predict/bulk/strict",
    response_model=BulkPredictionResponse,
    responses=VALIDATION_ERROR,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": STRICT_BODY_SCHEMA}},
        }
    },
)
async def predict_bulk_strict(
    request: Request, bundle: ServingBundle, settings: SettingsDep, metrics: MetricsDep
) -> Response:
    """All rows or none: any invalid row answers 422 naming its index and field."""
    raw = await request.body()
    # From the complete body on: the time to receive it is the client's upload (on a busy
    # client host, its scheduling), not our processing.
    started = time.perf_counter()
    try:
        columns = pipeline.decode_strict(raw, settings.max_rows_per_call)
    except InvalidBatch as exc:
        metrics.predict.errors.labels("strict", exc.reason).inc()
        raise RequestValidationError(exc.errors) from None
    rows = len(columns["input_token_length"])
    predictions = await _predicted(bundle, columns, rows)
    body = pipeline.encode_strict(bundle, predictions, rows, started)
    metrics.predict.observe("strict", time.perf_counter() - started, rows)
    return Response(body, media_type="application/json")


@router.post("/predict/bulk", response_model=BulkPredictionResponse)
async def predict_bulk(
    body: BulkPredictionRequest, bundle: ServingBundle, settings: SettingsDep, metrics: MetricsDep
) -> Response:
    """The body is validated whole first, as in the llm-d service: a row with a missing field
    or a wrong type answers 422 naming body.requests.<i>.<field>. `errors` lists the valid
    rows whose prediction failed (not a finite number), each answered null."""
    started = time.perf_counter()
    total = len(body.requests)
    if total > settings.max_rows_per_call:
        raise RequestValidationError(pipeline.too_many(total, settings.max_rows_per_call).errors)
    rows = [row.model_dump() for row in body.requests]
    predictions = await _predicted(bundle, pipeline.decode_rows(rows), total)
    errors = pipeline.failed_rows(predictions, rows)
    if errors:
        metrics.predict.errors.labels("bulk", "prediction_failed").inc(len(errors))
    answer = pipeline.encode_bulk(bundle, predictions, errors, started)
    metrics.predict.observe("bulk", time.perf_counter() - started, total - len(errors))
    return Response(answer, media_type="application/json")


@router.post("/predict", response_model=PredictionResponse)
async def predict(row: PredictionRequest, bundle: ServingBundle, metrics: MetricsDep) -> Response:
    started = time.perf_counter()
    predictions = pipeline.predict(bundle, pipeline.decode_rows([row.model_dump()]))
    body = encode_prediction(bundle, predictions)
    metrics.predict.observe("predict", time.perf_counter() - started, 1)
    return Response(body, media_type="application/json")
