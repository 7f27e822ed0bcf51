"""create_app(settings): the training server, built from its parts at start-up."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CollectorRegistry

from shared.pools import DEFAULT_POOL
from shared.settings import TrainingSettings
from shared.slot import BundleSlot, prior_slot
from shared.web import auth
from shared.web.limits import RequestLimits, refused_counter
from shared.web.pool_metrics import PoolSeries
from shared.web.pool_prefix import PoolPrefix
from shared.web.predict_metrics import PredictMetrics
from training_server import migrate
from training_server.bundle_share import SharePuller
from training_server.db import make_engine
from training_server.leadership import make_leadership, replica_id
from training_server.metrics import TrainingMetrics
from training_server.pool_leases import make_pool_leases
from training_server.pools import PoolRegistry
from training_server.retrain.loop import PoolsLoop
from training_server.routes import advice, dashboard, fleet, models, ops, pools, predict, samples
from training_server.store import SampleStore

log = logging.getLogger(__name__)


def _lifespan(
    settings: TrainingSettings, metrics: TrainingMetrics, slot: BundleSlot, start_loop: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up and shutdown: the store, every pool's published bundle, the retrain loop
    and the live factors (their thread only with `start_loop`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.migrate_on_start:
            migrate.upgrade(settings.db_url)
        engine = make_engine(settings.db_url)
        store = SampleStore(engine, test_ratio=settings.test_train_ratio)
        # Several replicas may share the store: every one ingests; each pool is retrained by
        # the replica holding its lease (one lock for every pool outside PostgreSQL).
        leadership = make_leadership(engine)
        ttl = settings.pool_lease_ttl_sec
        leases = make_pool_leases(engine, leadership, replica_id(), ttl_s=ttl, heartbeat_s=ttl / 4)
        pools = await run_in_threadpool(
            PoolRegistry, settings, store, leadership, slot, metrics, leases
        )
        opened = await run_in_threadpool(pools.discover)
        if opened:
            log.info("pools opened from the store and the model directory: %s", opened)
        app.state.pools = pools  # every pool, the default included: the routes' one lookup
        if start_loop:
            await run_in_threadpool(leases.start, pools.adopt)
        loop = PoolsLoop(
            pools.runtimes,
            leases,
            calibration_interval_sec=settings.calibration_interval_sec,
            wake=pools.added,
            arrived=pools.take_arrived,
        )
        puller = None
        if start_loop:
            loop.start()
            if settings.share_bundles_in_store:  # followers import the owners' bundles
                runtimes = pools.runtimes
                interval = settings.calibration_interval_sec
                puller = SharePuller(lambda: [r.calibrator for r in runtimes()], interval).start()
        try:
            yield
        finally:
            if puller is not None:
                puller.stop()
            loop.stop()
            engine.dispose()

    return lifespan


def _pool_registries(app: FastAPI, default: TrainingMetrics) -> dict[str, CollectorRegistry]:
    pools: PoolRegistry | None = getattr(app.state, "pools", None)
    return pools.metric_registries() if pools is not None else {DEFAULT_POOL: default.registry}


def create_app(settings: TrainingSettings, *, start_loop: bool = True) -> FastAPI:
    metrics = TrainingMetrics()
    # The default pool's slot, the one owner of the bundle it serves: its retrainer, live
    # calibration and bundle imports publish into it; the routes read it.
    slot = prior_slot(settings)
    app = FastAPI(
        title="latency-predictor training server",
        lifespan=_lifespan(settings, metrics, slot, start_loop),
    )
    app.state.settings = settings
    # /metrics: the process's own series, then every pool's labelled by pool (PoolSeries).
    registry = CollectorRegistry()
    auth.install(app, settings)
    app.add_middleware(
        RequestLimits,
        max_body_bytes=settings.max_body_bytes,
        refused=refused_counter(registry),
        capped={"/add_training_data_bulk": settings.max_concurrent_ingests},
    )
    app.state.predict_metrics = PredictMetrics(registry)
    registry.register(PoolSeries(lambda: _pool_registries(app, metrics)))
    app.state.metric_registry = registry
    app.include_router(samples.router)
    app.include_router(models.router)
    app.include_router(ops.router)
    app.include_router(fleet.router)
    app.include_router(dashboard.router)
    app.include_router(advice.router)
    app.include_router(predict.router, dependencies=auth.require(auth.Access.EPP))
    app.include_router(pools.router)
    app.add_middleware(PoolPrefix)  # outermost: the others see the route's own path
    return app
