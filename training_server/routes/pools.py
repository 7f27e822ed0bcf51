"""GET /pools: the pools this trainer keeps, for the dashboard's and the CLI's pool
selector and for prediction servers that mirror every pool's bundle."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.exc import SQLAlchemyError

from shared.web.auth import Access, require
from shared.wire import rfc3339
from training_server.deps import PoolsDep
from training_server.pools import PoolRuntime

router = APIRouter()


def _pool_json(pool: PoolRuntime) -> dict[str, Any]:
    published = pool.slot.published
    last = pool.retrainer.state.last_success
    try:
        rows: int | None = pool.store.counts()["training_data"]["total_samples"]
    except SQLAlchemyError:
        rows = None  # the store does not answer; the rest is this replica's memory
    return {
        "name": pool.name,
        "model_version": published.version if published else None,
        "training_samples": rows,
        "trained_through_sample_id": pool.retrainer.state.trained_through,
        "last_retrain_at": rfc3339(last.started_at) if last else None,
        "consecutive_retrain_failures": pool.retrainer.state.consecutive_failures,
        "prefix": "" if pool.name == "default" else f"/pools/{pool.name}",
    }


@router.get("/pools", dependencies=require(Access.EPP))
async def list_pools(pools: PoolsDep) -> dict[str, Any]:
    listed = await run_in_threadpool(lambda: [_pool_json(p) for p in pools.runtimes()])
    return {"pools": listed, "max_pools": pools.max_pools}
