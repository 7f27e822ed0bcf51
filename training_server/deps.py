"""What create_app built, handed to the routes as Annotated dependencies.

Everything a pool owns (its settings, store, slot, metrics, retrainer, fleet) is the pool's
of the request: its `/pools/<name>` prefix, else `default` (shared.web.pool_prefix). A pool
that does not exist answers from a vacant runtime, as a fresh service would.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CollectorRegistry

from shared.predictor import LoadedBundle
from shared.settings import TrainingSettings
from shared.slot import BundleSlot
from shared.web.pool_prefix import pool_of
from shared.web.predict_metrics import PredictMetrics
from shared.web.state import from_state
from training_server.metrics import TrainingMetrics
from training_server.pools import PoolLimitError, PoolRegistry, PoolRuntime
from training_server.prediction_fleet import PredictionFleet
from training_server.retrain.loop import Retrainer
from training_server.store import SampleStore


async def _pools(request: Request) -> PoolRegistry:
    pools: PoolRegistry = request.app.state.pools
    return pools


PoolsDep = Annotated[PoolRegistry, Depends(_pools)]


async def _runtime(request: Request, pools: PoolsDep) -> PoolRuntime:
    return pools.lookup(pool_of(request))


RuntimeDep = Annotated[PoolRuntime, Depends(_runtime)]


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


async def _settings(runtime: RuntimeDep) -> TrainingSettings:
    return runtime.settings


async def _store(runtime: RuntimeDep) -> SampleStore:
    return runtime.store


async def _metrics(runtime: RuntimeDep) -> TrainingMetrics:
    return runtime.metrics


async def _retrainer(runtime: RuntimeDep) -> Retrainer:
    return runtime.retrainer


async def _slot(runtime: RuntimeDep) -> BundleSlot:
    return runtime.slot


async def _fleet(runtime: RuntimeDep) -> PredictionFleet:
    return runtime.fleet


async def _published(runtime: RuntimeDep) -> LoadedBundle | None:
    return runtime.slot.published


async def _serving(request: Request, pools: PoolsDep) -> LoadedBundle:
    return pools.serving(pool_of(request))


SettingsDep = Annotated[TrainingSettings, Depends(_settings)]
StoreDep = Annotated[SampleStore, Depends(_store)]
MetricsDep = Annotated[TrainingMetrics, Depends(_metrics)]
PredictMetricsDep = Annotated[PredictMetrics, from_state("predict_metrics")]
# The process's registry: its own series and every pool's (shared.web.pool_metrics).
MetricRegistryDep = Annotated[CollectorRegistry, from_state("metric_registry")]
RetrainerDep = Annotated[Retrainer, Depends(_retrainer)]
SlotDep = Annotated[BundleSlot, Depends(_slot)]
FleetDep = Annotated[PredictionFleet, Depends(_fleet)]
# The trained bundle the pool serves; None while nothing is published.
PublishedBundle = Annotated[LoadedBundle | None, Depends(_published)]
# What /predict answers with: the pool's published bundle, or the cold-start prior.
ServingBundle = Annotated[LoadedBundle, Depends(_serving)]
