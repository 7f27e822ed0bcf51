"""What create_app built, handed to the routes as Annotated dependencies (over app.state)."""

from __future__ import annotations

from typing import Annotated

from shared.predictor import LoadedBundle
from shared.settings import TrainingSettings
from shared.slot import BundleSlot
from shared.web.predict_metrics import PredictMetrics
from shared.web.state import from_state, slot_attribute
from training_server.metrics import TrainingMetrics
from training_server.prediction_fleet import PredictionFleet
from training_server.retrain.loop import Retrainer
from training_server.store import SampleStore

SettingsDep = Annotated[TrainingSettings, from_state("settings")]
StoreDep = Annotated[SampleStore, from_state("store")]
MetricsDep = Annotated[TrainingMetrics, from_state("metrics")]
PredictMetricsDep = Annotated[PredictMetrics, from_state("predict_metrics")]
RetrainerDep = Annotated[Retrainer, from_state("retrainer")]
SlotDep = Annotated[BundleSlot, from_state("slot")]
FleetDep = Annotated[PredictionFleet, from_state("fleet")]
# The trained bundle this replica serves; None while nothing is published.
PublishedBundle = Annotated[LoadedBundle | None, slot_attribute("published")]
# What /predict answers with: the published bundle, or the cold-start prior.
ServingBundle = Annotated[LoadedBundle, slot_attribute("serving")]
