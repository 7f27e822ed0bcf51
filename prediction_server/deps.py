"""What create_app built, handed to the routes as Annotated dependencies (over app.state)."""

from __future__ import annotations

from typing import Annotated

from prediction_server.metrics import PredictionMetrics
from prediction_server.watcher import ModelWatcher
from shared.predictor import LoadedBundle
from shared.settings import PredictionSettings
from shared.web.state import from_state, slot_attribute

# One reference per request: TTFT and TPOT always come from the same bundle.
ServingBundle = Annotated[LoadedBundle, slot_attribute("serving")]
SettingsDep = Annotated[PredictionSettings, from_state("settings")]
MetricsDep = Annotated[PredictionMetrics, from_state("metrics")]
WatcherDep = Annotated[ModelWatcher, from_state("watcher")]
