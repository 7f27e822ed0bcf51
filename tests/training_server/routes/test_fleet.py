"""Prediction servers' version reports: POST /prediction_servers/report, GET /prediction_servers,
through the real training app."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from training_server.prediction_fleet import MAX_PREDICTION_SERVERS


def report(client: TestClient, server_id: str, **fields: Any) -> None:
    body = {
        "id": server_id,
        "model_version": "v1",
        "loaded_at": "2026-01-02T03:04:05Z",
        "is_ready": True,
        **fields,
    }
    response = client.post("/prediction_servers/report", json=body)
    assert response.status_code == 200, response.text


def listed(client: TestClient) -> list[dict[str, Any]]:
    response = client.get("/prediction_servers")
    assert response.status_code == 200
    servers: list[dict[str, Any]] = response.json()["servers"]
    return servers


def test_a_report_is_listed_with_what_it_said(client: TestClient) -> None:
    report(client, "pod-a/7", interval_s=1.0)
    [server] = listed(client)
    assert server["id"] == "pod-a/7"
    assert server["model_version"] == "v1"
    assert server["loaded_at"] == "2026-01-02T03:04:05Z"
    assert server["is_ready"] is True
    assert server["stale"] is False and server["stale_after_s"] == 3.0
    assert server["last_seen"].endswith("Z") and 0 <= server["seen_ago_s"] < 5
    # the trainer has no bundle yet: nothing to be behind of
    assert server["on_current_version"] is None


def test_servers_on_another_version_than_the_trainer_are_marked(trained: TestClient) -> None:
    fleet = trained.get("/prediction_servers").json()
    current = fleet["current_version"]
    assert current == trained.get("/data/status").json()["model_version"]
    assert fleet["current_version_created_at"].endswith("Z")
    report(trained, "old", model_version="20200101T000000.000000Z")
    report(trained, "new", model_version=current)
    assert {s["id"]: s["on_current_version"] for s in listed(trained)} == {
        "old": False,
        "new": True,
    }


def test_newest_report_first_and_one_entry_per_server(client: TestClient) -> None:
    for server_id in ("a", "b", "c"):
        report(client, server_id)
    report(client, "a", model_version="v2")
    servers = listed(client)
    assert [s["id"] for s in servers] == ["a", "c", "b"]
    assert servers[0]["model_version"] == "v2"


def test_a_server_that_stops_reporting_turns_stale(client: TestClient) -> None:
    report(client, "fast", interval_s=0.05)  # stale after 3 missed reports: 0.15 s
    report(client, "default")  # no interval said: stale after 30 s
    time.sleep(0.3)
    assert {s["id"]: s["stale"] for s in listed(client)} == {"fast": True, "default": False}
    report(client, "fast", interval_s=0.05)
    assert [(s["id"], s["stale"]) for s in listed(client)] == [("fast", False), ("default", False)]


def test_the_list_is_bounded_and_drops_the_server_seen_longest_ago(client: TestClient) -> None:
    for i in range(MAX_PREDICTION_SERVERS + 2):
        report(client, f"pod-{i}")
    servers = listed(client)
    assert len(servers) == MAX_PREDICTION_SERVERS
    ids = {s["id"] for s in servers}
    assert "pod-0" not in ids and "pod-1" not in ids
    assert servers[0]["id"] == f"pod-{MAX_PREDICTION_SERVERS + 1}" and "pod-2" in ids


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model_version": None}, "model_version"),
        ({"model_version": ""}, "model_version"),
        ({"id": ""}, "id"),
        ({"id": "x" * 201}, "id"),
        ({"is_ready": "yes"}, "is_ready"),
        ({"loaded_at": "yesterday"}, "loaded_at"),
        ({"interval_s": 0}, "interval_s"),
    ],
)
def test_a_bad_report_is_422_naming_the_field(
    client: TestClient, change: dict[str, Any], field: str
) -> None:
    body = {"id": "pod", "model_version": "v1", "is_ready": True, **change}
    body = {k: v for k, v in body.items() if v is not None}
    response = client.post("/prediction_servers/report", json=body)
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", field]]
    assert listed(client) == []


def test_a_report_that_is_not_an_object_is_422(client: TestClient) -> None:
    response = client.post("/prediction_servers/report", json=["pod", "v1"])
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body"]
