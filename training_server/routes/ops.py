"""Operations routes: probes, status, metrics, flush, retrain history, manual retrain."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import generate_latest
from sqlalchemy.exc import SQLAlchemyError

from shared.predictor import LoadedBundle
from shared.schemas import FlushRequest
from shared.targets import TARGETS
from shared.web.auth import Access, require
from shared.web.json_body import JSONBodyRoute
from shared.wire import rfc3339
from training_server.deps import (
    MetricRegistryDep,
    PoolDep,
    PoolsDep,
    PublishedBundle,
    StoreDep,
    fresh,
)
from training_server.metrics import TrainingMetrics, legacy_lines, served_importances
from training_server.pools import PoolRuntime, PoolView
from training_server.retrain_record import Outcome, RetrainRecord, to_columns
from training_server.sample_counts import SampleCounts
from training_server.store import SampleStore

# JSONBodyRoute: a bad JSON body (NaN, 1e999, not UTF-8) answers the contract's 422.
router = APIRouter(route_class=JSONBodyRoute)

# After this many failed retrains in a row the trainer reports itself degraded.
DEGRADED_AFTER_FAILURES = 3


def retrain_json(record: RetrainRecord | None) -> dict[str, Any] | None:
    """A retrain as the API answers it: its row of the retrains table (with the key once
    stored: a retrain fresh from the loop has none yet), times in RFC 3339."""
    if record is None:
        return None
    row = to_columns(record)
    if record.id is not None:
        row = {"id": record.id, **row}
    return {k: rfc3339(v) if isinstance(v, datetime) else v for k, v in row.items()}


@router.get("/", dependencies=require(Access.EPP))
async def root(bundle: PublishedBundle) -> dict[str, Any]:
    return {
        "service": "latency-predictor training server",
        "description": "Stores completed-request samples, retrains quantile TTFT/TPOT models "
        "and publishes them to the shared model directory.",
        "docs": "/docs",
        "model_version": bundle.version if bundle else None,
    }


@router.get("/healthz")
async def healthz(pool: PoolDep) -> dict[str, Any]:
    failures = pool.state.consecutive_failures
    status = "degraded" if failures >= DEGRADED_AFTER_FAILURES else "ok"
    return {"status": status, "consecutive_retrain_failures": failures}


@router.get("/readyz")
async def readyz(store: StoreDep, bundle: PublishedBundle) -> Any:
    """Ready when the store answers: samples must be accepted before any model exists."""
    try:
        await run_in_threadpool(store.ping)
    except SQLAlchemyError as exc:
        raise HTTPException(503, f"store unavailable: {type(exc).__name__}") from exc
    return {"status": "ready", "model_ready": bundle is not None}


def _status_payload(
    bundle: LoadedBundle | None,
    counts: SampleCounts,
    queue_counts: dict[str, int],
    pool: PoolView,
) -> dict[str, Any]:
    state = pool.state
    last = state.last_success
    return {
        **counts.as_json(),
        # llm-d's queue-gated ensemble is never served here (one model per target, with the
        # queue as a feature); the counts are the store's, split as it would split them.
        "ensemble": {
            "ensemble_mode": False,
            "ensemble_active": False,
            "min_samples_for_split": None,  # no split, so no threshold
            **queue_counts,
        },
        "model_ready": bundle is not None,
        "model_version": bundle.version if bundle else None,
        # When the last successful retrain started (its bundle's created_at), as llm-d's
        # timestamp; the whole row under last_retrain_detail.
        "last_retrain": rfc3339(last.started_at) if last else None,
        "last_retrain_detail": retrain_json(last),
        "last_retrain_attempt_at": rfc3339(state.last_attempt_at),
        "retrain_failures": {
            "consecutive": state.consecutive_failures,
            "total": state.total_failures,
            "last_error": state.last_error,
        },
        # Which replica this is, whether it is the one that retrains and publishes the
        # pool, and which replica does (its lease; null while none holds it).
        "trainer": {
            "id": pool.trainer_id,
            "is_leader": pool.leadership.is_leader,
            "owner": pool.owner,
        },
    }


async def store_counts(store: SampleStore) -> SampleCounts:
    """The store's counts; 503 naming the failure when the store does not answer."""
    try:
        return await run_in_threadpool(store.counts)
    except SQLAlchemyError as exc:
        raise HTTPException(503, f"sample store unavailable: {type(exc).__name__}") from exc


@router.get("/data/status", dependencies=require(Access.EPP))
async def data_status(pool: PoolDep, bundle: PublishedBundle) -> dict[str, Any]:
    counts = await store_counts(pool.store)
    try:
        queue_counts = await run_in_threadpool(pool.store.queue_counts)
    except SQLAlchemyError as exc:
        raise HTTPException(503, f"sample store unavailable: {type(exc).__name__}") from exc
    return _status_payload(bundle, counts, queue_counts, pool)


@router.get("/retrains", dependencies=require(Access.DASHBOARD))
async def list_retrains(
    store: StoreDep,
    limit: int = Query(50, ge=1, le=1000),
    offset: int = Query(0, ge=0),
) -> dict[str, Any]:
    """Retrain history, newest first, with every held-out metric per target."""
    rows = await run_in_threadpool(lambda: store.list_retrains(limit=limit, offset=offset))
    return {"retrains": [retrain_json(r) for r in rows], "limit": limit, "offset": offset}


@router.post("/retrain", dependencies=require(Access.ADMIN))
async def retrain_now(pool: PoolDep) -> dict[str, Any]:
    """Run one retrain now (if new samples arrived) instead of waiting for the loop.

    On a replica that does not hold the leadership the outcome is "follower"; a pool that
    does not exist has no rows: "skipped"."""
    if not isinstance(pool, PoolRuntime):
        return {"outcome": Outcome.SKIPPED, "last_error": None}
    outcome = await run_in_threadpool(pool.retrainer.run_once)
    return {"outcome": outcome, "last_error": pool.state.last_error}


@router.post("/flush", dependencies=require(Access.ADMIN))
async def flush(pool: PoolDep, body: FlushRequest | None = None) -> dict[str, Any]:
    body = body or FlushRequest()
    store = pool.store
    flushed = await run_in_threadpool(
        lambda: store.flush(training=body.flush_training_data, test=body.flush_test_data)
    )
    cleared = 0
    if body.flush_metrics:
        cleared = await run_in_threadpool(store.clear_retrains)
        pool.state.last_success = None
    flushed.pop("samples_flushed")
    return {
        "success": True,
        "flushed_at": rfc3339(datetime.now(UTC)),
        "reason": body.reason,
        **flushed,
        "metrics_cleared": body.flush_metrics,
        "retrains_cleared": cleared,
        "message": flush_message(flushed, body),
    }


def flush_message(flushed: dict[str, int], body: FlushRequest) -> str:
    """llm-d's wording, which its tooling matches ("Successfully flushed: ...")."""
    parts = [
        f"{flushed[f'ttft_{split}_samples_flushed']} TTFT and "
        f"{flushed[f'tpot_{split}_samples_flushed']} TPOT {split} samples"
        for split, wanted in (
            ("training", body.flush_training_data),
            ("test", body.flush_test_data),
        )
        if wanted
    ]
    if body.flush_metrics:
        parts.append("all metric scores")
    return f"Successfully flushed: {', '.join(parts)}" if parts else "No data flushed"


def _store_gauges(counts: SampleCounts, m: TrainingMetrics) -> None:
    """Set one pool's stored-rows gauges."""
    for split, label in ((counts.training, "train"), (counts.test, "test")):
        for target in TARGETS:
            m.store_samples.labels(label, target.value).set(split.by_target[target])


@router.get("/metrics", dependencies=require(Access.EPP))
async def metrics(pool: PoolDep, pools: PoolsDep, registry: MetricRegistryDep) -> Response:
    """llm-d's lines for the request's pool, then every series of every pool, labelled.
    The stored-rows counts are each pool's as last counted (every retrain tick) plus the
    rows this replica stored since: a scrape makes no query, however many pools."""
    for runtime in pools.runtimes():
        _store_gauges(runtime.store.known_counts, runtime.metrics)
    await fresh(pool)
    settings, bundle = pool.settings, pool.slot.published
    lines = legacy_lines(
        model_type=(bundle.model_type if bundle else settings.model_type).value,
        objective=(bundle.objective if bundle else settings.objective_type).value,
        quantile=bundle.quantile if bundle else settings.quantile_alpha,
        counts=pool.store.known_counts,
        last_ok=pool.state.last_success,
        importances=served_importances(bundle, settings),
    )
    body = ("\n".join(lines) + "\n").encode() + generate_latest(registry)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
