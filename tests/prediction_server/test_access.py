"""Access control and limits on the prediction server: /reload needs the token, the EPP's
routes stay open unless locked, probes always answer, and oversized bodies are 413."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.prediction_server.helpers import epp_rows, running_app

TOKEN = "prediction-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
BODY = {"requests": epp_rows(4, seed=1)}


def test_reload_needs_the_token_and_predictions_do_not(model_dir: Path) -> None:
    with running_app(model_dir, api_token=TOKEN) as client:
        assert client.post("/reload").status_code == 401
        assert client.post("/reload", headers=BEARER).status_code == 200
        assert client.post("/predict/bulk/strict", json=BODY).status_code == 200
        assert client.post("/predict", json=BODY["requests"][0]).status_code == 200
        assert client.get("/status").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_locked_epp_routes_need_it_too_but_probes_never(model_dir: Path) -> None:
    with running_app(model_dir, api_token=TOKEN, protect_epp_routes=True) as client:
        calls: list[tuple[str, str, dict[str, Any]]] = [
            ("POST", "/predict/bulk/strict", {"json": BODY}),
            ("POST", "/predict/bulk", {"json": BODY}),
            ("GET", "/status", {}),
            ("GET", "/metrics", {}),
        ]
        for method, path, kwargs in calls:
            assert client.request(method, path, **kwargs).status_code == 401, path
            assert client.request(method, path, headers=BEARER, **kwargs).status_code == 200
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


def test_an_oversized_body_is_413_and_counted(model_dir: Path) -> None:
    with running_app(model_dir, max_body_bytes=2048) as client:
        big = {"requests": epp_rows(40, seed=2)}
        response = client.post("/predict/bulk/strict", json=big)
        assert response.status_code == 413
        assert "LATENCY_MAX_BODY_BYTES" in response.json()["detail"]
        text = client.get("/metrics").text
        counted = {
            (s.labels["route"], s.labels["reason"]): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "latency_requests_refused_total"
        }
        assert counted == {("/predict/bulk/strict", "too_large"): 1.0}
        assert client.post("/predict/bulk/strict", json=BODY).status_code == 200


def test_a_chunked_body_over_the_limit_is_413_on_the_strict_route(model_dir: Path) -> None:
    # The strict route reads its body itself: the cut-off read must not surface as a 500.
    with running_app(model_dir, max_body_bytes=2048) as client:
        chunks = (b" " * 512 for _ in range(16))  # no Content-Length
        response = client.post(
            "/predict/bulk/strict", content=chunks, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413
        assert "LATENCY_MAX_BODY_BYTES" in response.json()["detail"]
