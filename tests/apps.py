"""The app behind a TestClient, typed as what our servers build."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient


def app_of(client: TestClient) -> FastAPI:
    """client.app as the FastAPI both servers' create_app return (TestClient types it as
    any ASGI callable, which has no .state)."""
    app = client.app
    assert isinstance(app, FastAPI), type(app)
    return app
