"""What create_app built, handed to the routes as Annotated dependencies (over app.state).

Every dependency here is async: FastAPI runs a sync one in its threadpool, a needless hop.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from shared.predictor import LoadedBundle
from shared.settings import TrainingSettings
from shared.slot import BundleSlot
from shared.web.predict_metrics import PredictMetrics
from training_server.metrics import TrainingMetrics
from training_server.prediction_fleet import PredictionFleet
from training_server.retrainer import Retrainer
from training_server.store import SampleStore


async def _settings(request: Request) -> TrainingSettings:
    settings: TrainingSettings = request.app.state.settings
    return settings


async def _store(request: Request) -> SampleStore:
    store: SampleStore = request.app.state.store
    return store


async def _metrics(request: Request) -> TrainingMetrics:
    metrics: TrainingMetrics = request.app.state.metrics
    return metrics


async def _predict_metrics(request: Request) -> PredictMetrics:
    metrics: PredictMetrics = request.app.state.predict_metrics
    return metrics


async def _retrainer(request: Request) -> Retrainer:
    retrainer: Retrainer = request.app.state.retrainer
    return retrainer


async def _slot(request: Request) -> BundleSlot:
    slot: BundleSlot = request.app.state.slot
    return slot


async def _published(request: Request) -> LoadedBundle | None:
    slot: BundleSlot = request.app.state.slot
    return slot.published


async def _serving(request: Request) -> LoadedBundle:
    slot: BundleSlot = request.app.state.slot
    return slot.serving


async def _fleet(request: Request) -> PredictionFleet:
    fleet: PredictionFleet = request.app.state.fleet
    return fleet


SettingsDep = Annotated[TrainingSettings, Depends(_settings)]
StoreDep = Annotated[SampleStore, Depends(_store)]
MetricsDep = Annotated[TrainingMetrics, Depends(_metrics)]
PredictMetricsDep = Annotated[PredictMetrics, Depends(_predict_metrics)]
RetrainerDep = Annotated[Retrainer, Depends(_retrainer)]
SlotDep = Annotated[BundleSlot, Depends(_slot)]
# The trained bundle this replica serves; None while nothing is published.
PublishedBundle = Annotated[LoadedBundle | None, Depends(_published)]
# What /predict answers with: the published bundle, or the cold-start prior.
ServingBundle = Annotated[LoadedBundle, Depends(_serving)]
FleetDep = Annotated[PredictionFleet, Depends(_fleet)]
