"""Fleet routes: prediction servers report the version they serve; the dashboard lists them."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter

from shared.schemas import PredictionServerReport
from shared.web.auth import Access, require
from shared.web.json_body import JSONBodyRoute
from shared.wire import rfc3339
from training_server.deps import PoolDep, PublishedBundle
from training_server.prediction_fleet import SeenServer, ServerReport

# JSONBodyRoute: a bad JSON body (NaN, 1e999, not UTF-8) answers the contract's 422.
router = APIRouter(route_class=JSONBodyRoute)


def _listed(server: SeenServer, now: float, current: str | None) -> dict[str, Any]:
    report = server.report
    return {
        "id": report.id,
        "model_version": report.model_version,
        # None while the trainer has no bundle: nothing to be behind of yet
        "on_current_version": None if current is None else report.model_version == current,
        "loaded_at": rfc3339(report.loaded_at),
        "is_ready": report.is_ready,
        "last_seen": rfc3339(datetime.fromtimestamp(server.last_seen, UTC)),
        "seen_ago_s": round(server.seen_ago_s(now), 3),
        "stale": server.is_stale(now),
        "stale_after_s": report.stale_after_s(),
    }


@router.post("/prediction_servers/report", dependencies=require(Access.EPP))
async def report(body: PredictionServerReport, pool: PoolDep) -> dict[str, Any]:
    pool.fleet.record(ServerReport(**body.model_dump()))
    return {"recorded": body.id}


@router.get("/prediction_servers", dependencies=require(Access.DASHBOARD))
async def list_prediction_servers(bundle: PublishedBundle, pool: PoolDep) -> dict[str, Any]:
    """Newest report first, with the version this trainer serves to compare against."""
    manifest = bundle.manifest if bundle else None
    current = bundle.version if bundle else None
    now = time.time()
    return {
        "current_version": current,
        "current_version_created_at": rfc3339(manifest.created_at) if manifest else None,
        "servers": [_listed(s, now, current) for s in pool.fleet.newest_first()],
    }
