"""Bulk ingestion: validate each row, store the valid ones durably, then answer 202."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from shared.schemas import BulkTrainingEnvelope, TrainingEntry
from shared.web.auth import Access, require
from shared.web.json_body import JSONBodyRoute
from shared.web.pool_prefix import pool_of
from training_server.deps import PoolsDep, opened_pool

# JSONBodyRoute: a bad JSON body (NaN, 1e999, not UTF-8) answers the contract's 422.
router = APIRouter(route_class=JSONBodyRoute)
_ENTRY = TypeAdapter(TrainingEntry)
MAX_ERRORS_RETURNED = 20


def validate_entries(
    rows: list[dict[str, Any]],
) -> tuple[list[TrainingEntry], list[dict[str, Any]]]:
    """Valid entries, and FastAPI-style errors (loc body.entries.i.field) for the rest."""
    valid: list[TrainingEntry] = []
    errors: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        try:
            valid.append(_ENTRY.validate_python(row))
        except ValidationError as exc:
            for err in exc.errors(include_url=False, include_context=False):
                errors.append({**err, "loc": ["body", "entries", index, *err["loc"]]})
    return valid, errors


@router.post("/add_training_data_bulk", status_code=202, dependencies=require(Access.EPP))
async def add_training_data_bulk(
    payload: BulkTrainingEnvelope, request: Request, pools: PoolsDep
) -> dict[str, Any]:
    """Stores every valid row in one transaction, in the request's pool (created by its
    first valid rows). One bad row costs only itself: the answer is 202 with the rejected
    rows listed, or 422 when no row is valid."""
    started = time.perf_counter()
    name = pool_of(request)
    checked = pools.resolve(name)  # a view of a new pool: it opens only for valid rows
    settings, metrics = checked.settings, checked.metrics
    if len(payload.entries) > settings.max_rows_per_call:
        metrics.samples_rejected.labels("too_many_rows").inc(len(payload.entries))
        raise RequestValidationError(
            [
                {
                    "loc": ["body", "entries"],
                    "type": "too_long",
                    "input": None,
                    "msg": f"at most {settings.max_rows_per_call} entries per call "
                    f"(got {len(payload.entries)})",
                }
            ]
        )
    valid, errors = validate_entries(payload.entries)
    rejected = len(payload.entries) - len(valid)
    if rejected:
        metrics.samples_rejected.labels("invalid").inc(rejected)
    if not valid:
        raise RequestValidationError(errors)
    pool = await opened_pool(pools, name)
    store, metrics = pool.store, pool.metrics
    try:
        accepted = await run_in_threadpool(store.add_samples, valid)
    except SQLAlchemyError as exc:
        metrics.samples_rejected.labels("store_unavailable").inc(len(valid))
        raise HTTPException(503, f"sample store unavailable: {type(exc).__name__}") from exc
    metrics.samples_accepted.inc(accepted)
    pools.rows_arrived(pool.name)
    metrics.ingest_seconds.observe(time.perf_counter() - started)
    body: dict[str, Any] = {"message": f"Accepted {accepted} training samples."}
    if rejected:
        body.update(rejected=rejected, errors=errors[:MAX_ERRORS_RETURNED])
    return body
