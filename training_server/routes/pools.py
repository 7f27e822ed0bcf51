"""GET /pools: the pools this trainer keeps, for the dashboard's and the CLI's pool
selector and for prediction servers that mirror every pool's bundle."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from shared.pools import pool_url
from shared.web.auth import Access, require
from shared.wire import rfc3339
from training_server.deps import PoolsDep
from training_server.pools import PoolRuntime

router = APIRouter()


def _pool_json(pool: PoolRuntime) -> dict[str, Any]:
    published = pool.slot.published
    state = pool.state
    last = state.last_success
    return {
        "name": pool.name,
        "model_version": published.version if published else None,
        # as last counted (every retrain tick), plus the rows this replica stored since
        "training_samples": pool.store.known_counts.training.total,
        "trained_through_sample_id": state.trained_through,
        "last_retrain_at": rfc3339(last.started_at) if last else None,
        "consecutive_retrain_failures": state.consecutive_failures,
        "prefix": pool_url("", pool.name),
        # the training replica that retrains it (its lease; null while none holds it)
        "owner": pool.owner,
    }


@router.get("/pools", dependencies=require(Access.EPP))
async def list_pools(pools: PoolsDep) -> dict[str, Any]:
    return {"pools": [_pool_json(p) for p in pools.runtimes()], "max_pools": pools.max_pools}
