"""Access control on the training server: admin routes need the token once one is set, the
EPP's routes stay open unless locked too, probes never need it, and a token file can rotate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from tests.training_server.conftest import OpenClient

TOKEN = "s3cret-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
ADMIN = [
    ("post", "/flush", {"json": {}}),
    ("post", "/retrain", {}),
    ("get", "/model/export", {}),
    ("post", "/model/import", {"content": b"x"}),
]
EPP = [
    ("post", "/add_training_data_bulk", {"json": {"entries": synthetic_rows(3)}}),
    ("get", "/data/status", {}),
    ("get", "/metrics", {}),
    ("get", "/model/download/info", {}),
    ("get", "/models/list", {}),
    ("get", "/", {}),
    (
        "post",
        "/predict",
        {"json": {k: v for k, v in synthetic_rows(1)[0].items() if not k.startswith("actual_")}},
    ),
]


def call(
    client: TestClient, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any
) -> int:
    return client.request(method.upper(), path, headers=headers, **kwargs).status_code


@pytest.mark.parametrize(("method", "path", "kwargs"), ADMIN)
def test_admin_routes_need_the_token(
    open_client: OpenClient, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    client = open_client(api_token=TOKEN)
    refused = client.request(method.upper(), path, **kwargs)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert "API token" in refused.json()["detail"]
    assert call(client, method, path, {"Authorization": "Bearer wrong"}, **kwargs) == 401
    assert call(client, method, path, BEARER, **kwargs) != 401
    assert call(client, method, path, {"X-API-Token": TOKEN}, **kwargs) != 401


@pytest.mark.parametrize(("method", "path", "kwargs"), EPP)
def test_epp_routes_stay_open_unless_locked(
    open_client: OpenClient, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    open_one = open_client(api_token=TOKEN, name="open")
    assert call(open_one, method, path, **kwargs) < 400
    locked = open_client(api_token=TOKEN, protect_epp_routes=True, name="locked")
    assert call(locked, method, path, **kwargs) == 401
    assert call(locked, method, path, BEARER, **kwargs) < 400


def test_probes_never_need_the_token(open_client: OpenClient) -> None:
    client = open_client(api_token=TOKEN, protect_epp_routes=True, protect_dashboard=True)
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_the_dashboard_data_can_be_locked(open_client: OpenClient) -> None:
    assert open_client(api_token=TOKEN, name="a").get("/retrains").status_code == 200
    locked = open_client(api_token=TOKEN, protect_dashboard=True, name="b")
    assert locked.get("/retrains").status_code == 401
    assert locked.get("/retrains", headers=BEARER).status_code == 200


def test_without_a_token_everything_is_open(client: TestClient) -> None:
    assert client.post("/flush", json={}).status_code == 200


def test_a_token_file_is_reread_when_the_secret_rotates(
    open_client: OpenClient, tmp_path: Path
) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")  # as mounted from a Secret: trailing newline
    client = open_client(api_token_file=secret)
    assert client.post("/flush", json={}, headers=BEARER).status_code == 200
    secret.write_text("rotated-token-with-another-length")
    assert client.post("/flush", json={}, headers=BEARER).status_code == 401
    rotated = {"Authorization": "Bearer rotated-token-with-another-length"}
    assert client.post("/flush", json={}, headers=rotated).status_code == 200
    secret.unlink()  # configured but unreadable: refuse everyone rather than open up
    assert client.post("/flush", json={}, headers=rotated).status_code == 401
