"""Training-server app fixtures: the real app, its lifespan, a real SQLite file or PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from shared.live_calibration import LiveCalibration, read_live_calibration
from tests.apps import app_of
from tests.conftest import training_settings
from training_server.app import create_app

OpenClient = Callable[..., TestClient]


@pytest.fixture
def open_client(tmp_path: Path) -> Iterator[OpenClient]:
    """open_client(db_url=..., name=..., **settings overrides) -> a started TestClient.

    Each name gets its own folder, model directory and (by default) SQLite file."""
    with ExitStack() as stack:

        def _open(*, db_url: str | None = None, name: str = "a", **overrides: Any) -> TestClient:
            folder = tmp_path / name
            folder.mkdir()
            db_url = db_url or f"sqlite:///{folder / 'store.db'}"
            overrides.setdefault("model_dir", folder / "models")
            settings = training_settings(folder, db_url, **overrides)
            return stack.enter_context(TestClient(create_app(settings, start_loop=False)))

        yield _open


@pytest.fixture
def client(open_client: OpenClient) -> TestClient:
    return open_client()


def ingest(client: TestClient, rows: list[dict[str, Any]]) -> dict[str, Any]:
    response = client.post("/add_training_data_bulk", json={"entries": rows})
    assert response.status_code == 202, response.text
    accepted: dict[str, Any] = response.json()
    return accepted


def train(client: TestClient, n: int = 400, seed: int = 0) -> dict[str, Any]:
    """Ingest n synthetic rows and retrain; returns /data/status afterwards."""
    ingest(client, synthetic_rows(n, seed=seed))
    response = client.post("/retrain")
    assert response.status_code == 200
    assert response.json() == {"outcome": "ok", "last_error": None}
    status: dict[str, Any] = client.get("/data/status").json()
    return status


@pytest.fixture
def trained(client: TestClient) -> TestClient:
    train(client)
    return client


def published_of(client: TestClient) -> LiveCalibration:
    """The default pool's live calibration file as the leader last wrote it."""
    published = read_live_calibration(app_of(client).state.settings.model_dir)
    assert published is not None
    return published


def tick(client: TestClient) -> None:
    """One live calibration step of the default pool (the loop is not started)."""
    app_of(client).state.pools.default.calibrator.tick()
