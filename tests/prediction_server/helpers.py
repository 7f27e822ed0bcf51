"""Shared helpers for the prediction-server tests: a real app on a real model directory."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from prediction_server.app import create_app
from shared.settings import PredictionSettings
from tests.polling import eventually

WAIT_S = 20.0  # for what the watcher does within a few of its polls: a bound, not a pace


@contextmanager
def running_app(model_dir: Path, **settings: Any) -> Iterator[TestClient]:
    """The app with its lifespan (initial load + watcher) running."""
    values: dict[str, Any] = {"model_dir": model_dir, "model_sync_interval_sec": 0.05}
    values.update(settings)
    with TestClient(create_app(PredictionSettings(**values))) as client:
        yield client


def epp_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """Prediction rows as the EPP sends them (no actual_* fields)."""
    return [
        {k: v for k, v in r.items() if not k.startswith("actual_")}
        for r in synthetic_rows(n, seed=seed)
    ]


def strict(client: TestClient, rows: list[dict[str, Any]]) -> dict[str, Any]:
    response = client.post("/predict/bulk/strict", json={"requests": rows})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def metric_value(client: TestClient, line_prefix: str) -> float | None:
    """The value of the first /metrics sample line starting with `line_prefix`."""
    text = client.get("/metrics").text
    for line in text.splitlines():
        if line.startswith(line_prefix + " ") or line.startswith(line_prefix + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def served_version(client: TestClient) -> str:
    version: str = client.get("/status").json()["model_version"]
    return version


def wait_serving(client: TestClient, version: str, timeout: float = WAIT_S) -> None:
    """Until the app serves `version` (its watcher polls every 50 ms)."""
    eventually(lambda: served_version(client) == version, timeout, f"the app serving {version}")


class FakeTrainerHandler(BaseHTTPRequestHandler):
    """Base of the fake trainers the mirror tests run: `reply` answers, nothing is logged."""

    def reply(self, body: bytes, kind: str = "json", status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"application/{kind}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1, served from a thread until the block ends: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
