"""What create_app built, handed to the routes as Annotated dependencies.

The bundle, the watcher and the metrics are the pool's of the request (its `/pools/<name>`
prefix, else `default`; shared.web.pool_prefix); the settings are the server's for every
pool. The default pool takes one scope lookup more than a single-pool server did.
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
from shared.web.pool_prefix import SCOPE_KEY
from shared.web.state import from_state


async def _serving(request: Request) -> LoadedBundle:
    # One reference per request: TTFT and TPOT always come from the same bundle.
    pool = request.scope.get(SCOPE_KEY)
    if pool is None:
        return request.app.state.slot.serving  # type: ignore[no-any-return]
    pools: ServedPools = request.app.state.pools
    return pools.serving(pool)


def _named(request: Request) -> ServedPool | None:
    """The named pool of the request as served; None for the default pool or a pool not
    served yet."""
    pool = request.scope.get(SCOPE_KEY)
    served: ServedPool | None = None if pool is None else request.app.state.pools.pools.get(pool)
    return served


async def _metrics(request: Request) -> PredictionMetrics:
    # A pool not served yet counts under the default pool: made-up names add no series.
    served = _named(request)
    metrics: PredictionMetrics = served.metrics if served else request.app.state.metrics
    return metrics


async def pool_watcher(request: Request) -> ModelWatcher | None:
    """The pool's watcher; None for a pool not served yet."""
    if SCOPE_KEY not in request.scope:
        return request.app.state.watcher  # type: ignore[no-any-return]
    served = _named(request)
    return served.watcher if served else None


async def _settings(request: Request) -> PredictionSettings:
    """The pool's settings (its model directory and trainer URL)."""
    served = _named(request)
    settings: PredictionSettings = served.settings if served else request.app.state.settings
    return settings


ServingBundle = Annotated[LoadedBundle, Depends(_serving)]
SettingsDep = Annotated[PredictionSettings, from_state("settings")]  # the server's own
PoolSettingsDep = Annotated[PredictionSettings, Depends(_settings)]
MetricsDep = Annotated[PredictionMetrics, Depends(_metrics)]
WatcherDep = Annotated[ModelWatcher | None, Depends(pool_watcher)]
PoolsDep = Annotated[ServedPools, from_state("pools")]
MetricRegistryDep = Annotated[CollectorRegistry, from_state("metric_registry")]
