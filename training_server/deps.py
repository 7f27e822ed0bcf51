"""Request-scoped access to what create_app built (FastAPI Annotated dependencies)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from shared.settings import TrainingSettings
from training_server.metrics import TrainingMetrics
from training_server.retrainer import Retrainer
from training_server.store import SampleStore


def _settings(request: Request) -> TrainingSettings:
    return request.app.state.settings


def _store(request: Request) -> SampleStore:
    return request.app.state.store


def _metrics(request: Request) -> TrainingMetrics:
    return request.app.state.metrics


def _retrainer(request: Request) -> Retrainer:
    return request.app.state.retrainer


SettingsDep = Annotated[TrainingSettings, Depends(_settings)]
StoreDep = Annotated[SampleStore, Depends(_store)]
MetricsDep = Annotated[TrainingMetrics, Depends(_metrics)]
RetrainerDep = Annotated[Retrainer, Depends(_retrainer)]
