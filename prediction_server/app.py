"""create_app(settings): the prediction server, built from its parts at start-up."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from prediction_server.pools import ServedPools
from prediction_server.routes import ops, predict
from shared.lean import keep_scikit_learn_out
from shared.settings import PredictionSettings
from shared.web import auth
from shared.web.limits import RequestLimits, refused_counter
from shared.web.pool_metrics import PoolSeries
from shared.web.pool_prefix import PoolPrefix
from shared.web.server import configure_logging

# A new bundle is loaded and compiled in a worker thread; with CPython's default 5 ms GIL
# switch interval a request arriving meanwhile could wait that long for the interpreter.
# 0.5 ms bounds that wait (measured in bench_load.py: server p99 under swaps).
GIL_SWITCH_INTERVAL_SEC = 0.0005


def _lifespan(
    settings: PredictionSettings, pools: ServedPools
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up and shutdown: every pool's watcher, and the discovery of new pools."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_SEC)
        settings.model_dir.mkdir(parents=True, exist_ok=True)
        await pools.start()
        try:
            yield
        finally:
            await pools.close()

    return lifespan


def create_app(settings: PredictionSettings) -> FastAPI:
    pools = ServedPools(settings)  # every pool, the default included: the routes' one lookup
    app = FastAPI(
        title="latency-predictor prediction server",
        lifespan=_lifespan(settings, pools),
    )
    app.state.settings, app.state.pools = settings, pools
    # /metrics: the process's own series, then every pool's labelled by pool (PoolSeries).
    registry = CollectorRegistry()
    registry.register(PoolSeries(pools.metric_registries))
    app.state.metric_registry = registry
    auth.install(app, settings)
    app.add_middleware(
        RequestLimits,
        max_body_bytes=settings.max_body_bytes,
        refused=refused_counter(registry),
    )

    # Guarded only when configured: otherwise the hot path resolves no guard at all.
    epp = auth.require(auth.Access.EPP) if settings.protect_epp_routes else []
    app.include_router(predict.router, dependencies=epp)
    app.include_router(ops.router)
    app.add_middleware(PoolPrefix)  # outermost: the others see the route's own path
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn worker processes: each builds its own app and model slot."""
    keep_scikit_learn_out()
    settings = PredictionSettings()
    configure_logging(settings.log_level)
    return create_app(settings)
