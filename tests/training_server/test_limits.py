"""Request limits on the training server: oversized bodies are refused with 413 before they
are read, and a flood of bulk ingestions is shed with 429 past the configured concurrency
(counted), while the call in progress still lands."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp

from devkit.synthetic import synthetic_rows
from shared.web.limits import RequestLimits
from tests.apps import app_of
from tests.polling import eventually
from tests.training_server.conftest import OpenClient


def refused(client: TestClient, route: str, reason: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for s in family.samples:
            if s.name == "latency_requests_refused_total" and s.labels == {
                "route": route,
                "reason": reason,
            }:
                return s.value
    return 0.0


@runtime_checkable
class Wrapper(Protocol):
    """A layer of Starlette's middleware chain: it calls the next one, `app`."""

    app: ASGIApp


def middleware(client: TestClient) -> RequestLimits:
    """The app's RequestLimits instance, found down Starlette's middleware chain."""
    layer = app_of(client).middleware_stack
    while not isinstance(layer, RequestLimits):
        assert isinstance(layer, Wrapper), f"no RequestLimits in the chain, reached {layer!r}"
        layer = layer.app
    return layer


def test_a_body_over_the_limit_is_413_by_its_length(open_client: OpenClient) -> None:
    client = open_client(max_body_bytes=4096)
    big = {"entries": synthetic_rows(50)}  # ~20 kB
    response = client.post("/add_training_data_bulk", json=big)
    assert response.status_code == 413
    assert "LATENCY_MAX_BODY_BYTES" in response.json()["detail"]
    assert refused(client, "/add_training_data_bulk", "too_large") == 1.0
    assert client.get("/data/status").json()["training_data"]["total_samples"] == 0
    assert (
        client.post("/add_training_data_bulk", json={"entries": synthetic_rows(3)}).status_code
        == 202
    )


def test_a_chunked_body_is_cut_off_at_the_limit(open_client: OpenClient) -> None:
    client = open_client(max_body_bytes=4096)
    chunks = (b" " * 1024 for _ in range(64))  # no Content-Length: counted as it arrives
    response = client.post(
        "/add_training_data_bulk", content=chunks, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert refused(client, "/add_training_data_bulk", "too_large") == 1.0


def test_ingestion_past_its_concurrency_is_shed_and_the_first_call_lands(
    open_client: OpenClient, tmp_path: Path
) -> None:
    client = open_client(max_concurrent_ingests=1)
    db = sqlite3.connect(tmp_path / "a" / "store.db", isolation_level=None, timeout=30)
    db.execute("BEGIN EXCLUSIVE")  # the store waits (busy timeout) while this is held
    first: list[int] = []
    writer = threading.Thread(
        target=lambda: first.append(
            client.post(
                "/add_training_data_bulk", json={"entries": synthetic_rows(5, seed=1)}
            ).status_code
        )
    )
    writer.start()
    try:
        limits = middleware(client)
        eventually(  # the first holds the slot
            lambda: limits.in_progress["/add_training_data_bulk"] >= 1,
            10,
            "the first ingestion started",
            interval=0.02,
        )
        shed = client.post("/add_training_data_bulk", json={"entries": synthetic_rows(2)})
        assert shed.status_code == 429, shed.text
        assert shed.headers["retry-after"] == "1"
    finally:
        db.execute("ROLLBACK")
        db.close()
        writer.join(30)
    assert first == [202]
    assert refused(client, "/add_training_data_bulk", "shed") >= 1.0
    status = client.get("/data/status").json()
    assert status["training_data"]["total_samples"] + status["test_data"]["total_samples"] >= 5
