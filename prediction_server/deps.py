"""What create_app built, handed to the routes as Annotated dependencies (over app.state).

Every dependency here is async: FastAPI runs a sync one in its threadpool, a hop the hot
path cannot afford.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from prediction_server.metrics import PredictionMetrics
from prediction_server.watcher import ModelWatcher
from shared.predictor import LoadedBundle
from shared.settings import PredictionSettings
from shared.slot import BundleSlot


async def _serving(request: Request) -> LoadedBundle:
    slot: BundleSlot = request.app.state.slot
    return slot.serving


async def _settings(request: Request) -> PredictionSettings:
    settings: PredictionSettings = request.app.state.settings
    return settings


async def _metrics(request: Request) -> PredictionMetrics:
    metrics: PredictionMetrics = request.app.state.metrics
    return metrics


async def _watcher(request: Request) -> ModelWatcher:
    watcher: ModelWatcher = request.app.state.watcher
    return watcher


# One reference per request: TTFT and TPOT always come from the same bundle.
ServingBundle = Annotated[LoadedBundle, Depends(_serving)]
SettingsDep = Annotated[PredictionSettings, Depends(_settings)]
MetricsDep = Annotated[PredictionMetrics, Depends(_metrics)]
WatcherDep = Annotated[ModelWatcher, Depends(_watcher)]
