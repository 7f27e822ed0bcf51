"""Every prediction-server metric is exported with HELP and TYPE, and the ones not covered
beside their feature's tests move when what they count happens."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from prediction_server.metrics import PredictionMetrics
from shared.predictor import prior_bundle
from shared.settings import ModelType, ObjectiveType
from shared.slot import BundleSlot
from tests.conftest import publish_trained_bundle
from tests.polling import eventually
from tests.prediction_server.helpers import WAIT_S, epp_rows, running_app, strict


def value(client: TestClient, name: str, **labels: str) -> float | None:
    text = client.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return None


def test_every_registered_family_is_exported_with_help_and_type(model_dir: Path) -> None:
    slot = BundleSlot(prior_bundle(ModelType.XGBOOST, ObjectiveType.QUANTILE, 0.9))
    ours = {family.name for family in PredictionMetrics(slot).registry.collect()}
    with running_app(model_dir) as client:
        text = client.get("/metrics").text
    for name in ours:
        assert f"# HELP {name}" in text, name
        assert f"# TYPE {name} " in text or f"# TYPE {name}_total counter" in text, name


def test_errors_count_by_route_and_reason(model_dir: Path) -> None:
    with running_app(model_dir) as client:
        bad = epp_rows(3, seed=1)
        bad[1]["kv_cache_percentage"] = 3.0
        assert client.post("/predict/bulk/strict", json={"requests": bad}).status_code == 422
        assert client.post("/predict/bulk/strict", content=b"{nope").status_code == 422
        assert (
            value(client, "latency_predict_errors_total", route="strict", reason="invalid_row")
            == 1.0
        )
        assert (
            value(client, "latency_predict_errors_total", route="strict", reason="invalid_json")
            == 1.0
        )
        assert value(client, "latency_predicted_rows_total", route="strict") is None


def test_model_age_is_zero_on_the_prior_then_counts_from_the_bundle(model_dir: Path) -> None:
    with running_app(model_dir) as client:
        assert value(client, "latency_model_age_seconds") == 0.0
        publish_trained_bundle(model_dir, seed=3)
        eventually(
            lambda: (value(client, "latency_model_age_seconds") or 0.0) > 0.0,
            WAIT_S,
            "a model age once a bundle is served",
        )
        strict(client, epp_rows(4, seed=2))
        seconds = value(client, "latency_predict_duration_seconds_count", route="strict")
        assert seconds == 1.0
