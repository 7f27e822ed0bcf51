"""GET /pools: the pools this trainer keeps, for the dashboard's and the CLI's pool
selector and for prediction servers that mirror every pool's bundle.

With `?calibration=true` each pool also carries its live calibration document (what
GET /pools/<name>/calibration answers): a prediction server mirroring many pools then
learns every pool's newest version and factors in one request per sync interval, and asks
a pool's own routes only when its bundle changed (prediction_server.pools)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from shared.pools import pool_url
from shared.web.auth import Access, require
from shared.wire import rfc3339
from training_server.deps import PoolsDep
from training_server.pools import PoolRuntime

router = APIRouter()


def _pool_json(pool: PoolRuntime, calibration: bool) -> dict[str, Any]:
    state = pool.state
    last = state.last_success
    live = pool.calibrator.published()
    return {
        "name": pool.name,
        # a follower's newest published version, loaded or not (a pool's routes load it)
        "model_version": pool.retrainer.newest_version(),
        # as last counted (every retrain tick), plus the rows this replica stored since
        "training_samples": pool.store.known_counts.training.total,
        "trained_through_sample_id": state.trained_through,
        "last_retrain_at": rfc3339(last.started_at) if last else None,
        "consecutive_retrain_failures": state.consecutive_failures,
        "prefix": pool_url("", pool.name),
        # the training replica that retrains it (its lease; null while none holds it)
        "owner": pool.owner,
        "calibration_updated_at": rfc3339(live.updated_at) if live else None,
    } | (
        # only when asked: the dashboard's and the CLI's listings do without the documents
        {"live_calibration": live.model_dump(mode="json") if live else None} if calibration else {}
    )


@router.get("/pools", dependencies=require(Access.EPP))
async def list_pools(
    pools: PoolsDep,
    calibration: bool = Query(False, description="include each pool's live calibration"),
) -> dict[str, Any]:
    listed = [_pool_json(p, calibration) for p in pools.runtimes()]
    return {"pools": listed, "max_pools": pools.max_pools}
