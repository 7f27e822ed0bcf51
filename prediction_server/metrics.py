"""Prediction-server metrics: predict routes plus model version, age and reloads."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge

from prediction_server.slot import ModelSlot
from shared.predict_metrics import PredictMetrics


class PredictionMetrics:
    def __init__(self, slot: ModelSlot, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.predict = PredictMetrics(r)
        self.reloads = Counter("latency_model_reloads", "Bundles loaded and swapped in", registry=r)
        self.refused = Counter(
            "latency_model_refused", "Bundles refused (corrupt, partial, inconsistent)",
            registry=r,
        )
        self.sync_errors = Counter(
            "latency_model_sync_errors", "Failed bundle downloads from the training server",
            registry=r,
        )
        self.watch_errors = Counter(
            "latency_model_watch_errors", "Model watch steps that failed unexpectedly", registry=r
        )
        self.loaded_version = Gauge(
            "latency_model_loaded_info", "The bundle being served (value 1)", ["version"],
            registry=r,
        )
        age = Gauge(
            "latency_model_age_seconds", "Seconds since the served bundle was trained "
            "(0 while serving the cold-start prior)", registry=r,
        )
        age.set_function(lambda: _age(slot))

    def served(self, version: str, previous: str | None) -> None:
        if previous is not None:
            self.loaded_version.remove(previous)
        self.loaded_version.labels(version).set(1)


def _age(slot: ModelSlot) -> float:
    manifest = slot.bundle.manifest
    return 0.0 if manifest is None else max(0.0, time.time() - manifest.created_at.timestamp())
