"""Prediction-server metrics: predict routes plus model version, age and reloads."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge

from shared.artifact import FORMAT_VERSION
from shared.predictor import LoadedBundle
from shared.slot import BundleSlot
from shared.web.predict_metrics import PredictMetrics


class PredictionMetrics:
    def __init__(self, slot: BundleSlot, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.predict = PredictMetrics(r)
        self.reloads = Counter("latency_model_reloads", "Bundles loaded and swapped in", registry=r)
        self.refused = Counter(
            "latency_model_refused",
            "Bundles refused (corrupt, partial, inconsistent)",
            registry=r,
        )
        # A refusal because the bundle needs a newer server (a format above the supported
        # one, or features this code does not know): the sign that this pod is the one to
        # upgrade. Back to 0 once a later bundle is served.
        self.format_needed = Gauge(
            "latency_bundle_format_needed",
            "Bundle format of the newest bundle refused because it needs a newer prediction "
            "server (0: none); above latency_bundle_format_supported for a newer format, "
            "else it names features this server does not know",
            registry=r,
        )
        Gauge(
            "latency_bundle_format_supported",
            "The newest bundle format this prediction server reads",
            registry=r,
        ).set(FORMAT_VERSION)
        self.sync_errors = Counter(
            "latency_model_sync_errors",
            "Failed bundle downloads from the training server",
            registry=r,
        )
        self.watch_errors = Counter(
            "latency_model_watch_errors", "Model watch steps that failed unexpectedly", registry=r
        )
        self.fleet_report_errors = Counter(
            "latency_fleet_report_errors",
            "Version reports the training server did not take (serving goes on regardless)",
            registry=r,
        )
        self.live_errors = Counter(
            "latency_live_calibration_errors",
            "Live calibration files that could not be read (the last good factors keep serving)",
            registry=r,
        )
        self.calibration_factor = Gauge(
            "latency_served_calibration_factor",
            "Factor applied to the model's answer: the "
            "bundle's conformal factor times the live one",
            ["target"],
            registry=r,
        )
        self.loaded_version = Gauge(
            "latency_model_loaded_info",
            "The bundle being served (value 1)",
            ["version"],
            registry=r,
        )
        age = Gauge(
            "latency_model_age_seconds",
            "Seconds since the served bundle was trained (0 while serving the cold-start prior)",
            registry=r,
        )
        age.set_function(lambda: _age(slot))

    def served(self, version: str, previous: str | None) -> None:
        if previous is not None:
            self.loaded_version.remove(previous)
        self.loaded_version.labels(version).set(1)

    def served_scales(self, bundle: LoadedBundle) -> None:
        for target, scale in bundle.scales.items():
            self.calibration_factor.labels(target.value).set(scale)


def _age(slot: BundleSlot) -> float:
    manifest = slot.serving.manifest
    return 0.0 if manifest is None else max(0.0, time.time() - manifest.created_at.timestamp())
