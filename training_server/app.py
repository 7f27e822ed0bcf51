"""create_app(settings): the training server, built from its parts at start-up."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from shared.artifact import BundleError
from shared.predictor import LoadedBundle, load_current_bundle
from shared.settings import LegacyArtifacts, TrainingSettings
from shared.slot import BundleSlot
from shared.web import auth
from shared.web.limits import RequestLimits, refused_counter
from shared.web.predict_metrics import PredictMetrics
from training_server import migrate
from training_server.db import make_engine
from training_server.leadership import make_leadership
from training_server.legacy.files import publish_prior_files
from training_server.metrics import TrainingMetrics
from training_server.prediction_fleet import PredictionFleet
from training_server.retrain.live_factor import LiveCalibrator
from training_server.retrain.loop import Retrainer, trainer_slot
from training_server.routes import advice, dashboard, fleet, models, ops, predict, samples
from training_server.store import SampleStore

log = logging.getLogger(__name__)


def _published(settings: TrainingSettings) -> LoadedBundle | None:
    try:
        return load_current_bundle(settings.model_dir)
    except BundleError:
        log.exception("the published bundle is unusable; the next retrain replaces it")
        return None


def _lifespan(
    settings: TrainingSettings, metrics: TrainingMetrics, slot: BundleSlot, start_loop: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up and shutdown: the store, the published bundle, the retrain loop and the live
    factor (their threads only with `start_loop`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.migrate_on_start:
            migrate.upgrade(settings.db_url)
        engine = make_engine(settings.db_url)
        store = SampleStore(engine, test_ratio=settings.test_train_ratio)
        published = _published(settings)
        if published is not None:
            slot.publish(published)
        if settings.legacy_artifacts is not LegacyArtifacts.NONE:
            # llm-d prediction servers are ready only with a model: the prior's, until then.
            await run_in_threadpool(publish_prior_files, settings)
        # Several replicas may share the store: every one ingests, only the leader retrains.
        retrainer = Retrainer(settings, store, metrics, slot, make_leadership(engine))
        calibrator = LiveCalibrator(settings, store, metrics, slot, lambda: retrainer.is_leader)
        retrainer.resume()
        app.state.store, app.state.retrainer = store, retrainer
        app.state.calibrator = calibrator
        if start_loop:
            retrainer.start()
            calibrator.start()
        try:
            yield
        finally:
            calibrator.stop()
            retrainer.stop()
            engine.dispose()

    return lifespan


def create_app(settings: TrainingSettings, *, start_loop: bool = True) -> FastAPI:
    metrics = TrainingMetrics()
    # The one owner of the bundle served: the retrainer, the live calibration and a bundle
    # import publish into it; the routes read it.
    slot = trainer_slot(settings)
    app = FastAPI(
        title="latency-predictor training server",
        lifespan=_lifespan(settings, metrics, slot, start_loop),
    )
    app.state.settings, app.state.slot = settings, slot
    auth.install(app, settings)
    app.add_middleware(
        RequestLimits,
        max_body_bytes=settings.max_body_bytes,
        refused=refused_counter(metrics.registry),
        capped={"/add_training_data_bulk": settings.max_concurrent_ingests},
    )
    app.state.metrics = metrics
    app.state.predict_metrics = PredictMetrics(metrics.registry)
    app.state.fleet = PredictionFleet()  # prediction servers' reports, in memory only
    app.include_router(samples.router)
    app.include_router(models.router)
    app.include_router(ops.router)
    app.include_router(fleet.router)
    app.include_router(dashboard.router)
    app.include_router(advice.router)
    app.include_router(predict.router, dependencies=auth.require(auth.Access.EPP))
    return app
