"""What create_app built, handed to the routes as Annotated dependencies.

Everything a pool owns (its settings, store, slot, metrics, retrains, fleet) is the pool's of
the request, looked up in one table (PoolRegistry.resolve) by its `/pools/<name>` prefix,
else `default` (shared.web.pool_prefix). A pool that does not exist answers from a light
read-only view, as a fresh service would; routes that bring a pool rows or a bundle open it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CollectorRegistry

from shared.predictor import LoadedBundle
from shared.settings import TrainingSettings
from shared.web.pool_prefix import pool_of
from shared.web.predict_metrics import PredictMetrics
from shared.web.state import from_state
from training_server.pools import PoolLimitError, PoolRegistry, PoolRuntime, PoolView
from training_server.store import SampleStore

PoolsDep = Annotated[PoolRegistry, from_state("pools")]


async def _pool(request: Request, pools: PoolsDep) -> PoolView:
    return pools.resolve(pool_of(request))


# The pool of the request, as it is (a read-only view of a pool that does not exist).
PoolDep = Annotated[PoolView, Depends(_pool)]


async def opened_pool(pools: PoolRegistry, name: str) -> PoolRuntime:
    """The pool `name`, created when new (rows or a bundle arrived for it); past
    LATENCY_MAX_POOLS a 409 naming the field."""
    runtime = pools.get(name)
    if runtime is not None:
        return runtime
    try:
        return await run_in_threadpool(pools.open, name)
    except PoolLimitError as exc:
        raise HTTPException(
            409, [{"loc": ["path", "pool"], "msg": str(exc), "type": "pool_limit"}]
        ) from exc


async def _opened(request: Request, pools: PoolsDep) -> PoolRuntime:
    return await opened_pool(pools, pool_of(request))


# The pool of the request, created when new: for routes that bring it rows or a bundle.
OpenedPoolDep = Annotated[PoolRuntime, Depends(_opened)]


async def _settings(pool: PoolDep) -> TrainingSettings:
    return pool.settings


async def _store(pool: PoolDep) -> SampleStore:
    return pool.store


async def fresh(pool: PoolView) -> None:
    """A follower on a shared model directory loads the pool's newest bundle when a route
    asks for it, not at every publication (retrain.retrainer: Retrainer.refresh)."""
    if isinstance(pool, PoolRuntime) and pool.retrainer.loads_when_asked():
        await run_in_threadpool(pool.retrainer.refresh)


async def _published(pool: PoolDep) -> LoadedBundle | None:
    await fresh(pool)
    return pool.slot.published


async def _serving(pool: PoolDep) -> LoadedBundle:
    await fresh(pool)
    return pool.slot.serving


SettingsDep = Annotated[TrainingSettings, Depends(_settings)]
StoreDep = Annotated[SampleStore, Depends(_store)]
PredictMetricsDep = Annotated[PredictMetrics, from_state("predict_metrics")]
# The process's registry: its own series and every pool's (shared.web.pool_metrics).
MetricRegistryDep = Annotated[CollectorRegistry, from_state("metric_registry")]
# The trained bundle the pool serves; None while nothing is published.
PublishedBundle = Annotated[LoadedBundle | None, Depends(_published)]
# What /predict answers with: the pool's published bundle, or the cold-start prior.
ServingBundle = Annotated[LoadedBundle, Depends(_serving)]
