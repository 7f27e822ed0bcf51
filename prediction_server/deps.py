"""What create_app built, handed to the routes as Annotated dependencies.

Everything a pool owns (its bundle, watcher, metrics, settings) is the pool's of the request,
looked up in one table (ServedPools.resolve) by the request's `/pools/<name>` prefix, else
`default` (shared.web.pool_prefix). The server-wide ones (its settings, the pool table, the
/metrics registry) come from app.state.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from prometheus_client import CollectorRegistry

from prediction_server.metrics import PredictionMetrics
from prediction_server.pools import ServedPool, ServedPools
from prediction_server.watcher import ModelWatcher
from shared.predictor import LoadedBundle
from shared.settings import PredictionSettings
from shared.web.pool_prefix import pool_of
from shared.web.state import from_state


async def served_pool(request: Request) -> ServedPool:
    """The request's pool, as served (a vacant view of a pool not served yet)."""
    pools: ServedPools = request.app.state.pools
    return pools.resolve(pool_of(request))


PoolDep = Annotated[ServedPool, Depends(served_pool)]


async def _serving(pool: PoolDep) -> LoadedBundle:
    # One reference per request: TTFT and TPOT always come from the same bundle.
    return pool.slot.serving


async def _metrics(pool: PoolDep) -> PredictionMetrics:
    return pool.metrics


async def _watcher(pool: PoolDep) -> ModelWatcher | None:
    return pool.watcher


async def _settings(pool: PoolDep) -> PredictionSettings:
    return pool.settings


ServingBundle = Annotated[LoadedBundle, Depends(_serving)]
SettingsDep = Annotated[PredictionSettings, from_state("settings")]  # the server's own
PoolSettingsDep = Annotated[PredictionSettings, Depends(_settings)]
MetricsDep = Annotated[PredictionMetrics, Depends(_metrics)]
WatcherDep = Annotated[ModelWatcher | None, Depends(_watcher)]
PoolsDep = Annotated[ServedPools, from_state("pools")]
MetricRegistryDep = Annotated[CollectorRegistry, from_state("metric_registry")]
