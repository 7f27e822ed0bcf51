"""Hot swap: a newly published bundle is served, a corrupt one is refused and counted."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from prediction_server.watcher import LOWEST_PRIORITY
from shared.artifact import MANIFEST, bundle_dir_for, publish_pointer
from shared.settings import ModelType, ObjectiveType
from tests.apps import app_of
from tests.conftest import publish_trained_bundle
from tests.polling import eventually
from tests.prediction_server.helpers import (
    WAIT_S,
    epp_rows,
    metric_value,
    running_app,
    served_version,
    strict,
    wait_serving,
)

ROWS = epp_rows(16, seed=40)
V1 = "20260301T000000.000000Z"
V2 = "20260302T000000.000000Z"
V3 = "20260303T000000.000000Z"


def ttfts(client: TestClient) -> list[float]:
    return [p["ttft_ms"] for p in strict(client, ROWS)["predictions"]]


def stage_corrupt_bundle(model_dir: Path, tmp_path: Path, version: str) -> None:
    """A complete bundle with one flipped model byte, then CURRENT pointed at it."""
    scratch = tmp_path / "scratch-models"
    scratch.mkdir(exist_ok=True)
    publish_trained_bundle(scratch, seed=9, version=version)
    target = bundle_dir_for(model_dir, version)
    shutil.copytree(bundle_dir_for(scratch, version), target)
    model_file = target / json.loads((target / MANIFEST).read_text())["targets"]["ttft"]["file"]
    data = bytearray(model_file.read_bytes())
    data[len(data) // 2] ^= 0x01
    model_file.write_bytes(bytes(data))
    publish_pointer(model_dir, version)


@pytest.mark.parametrize("how", ["reload", "watcher"])
def test_new_bundle_is_swapped_in(model_dir: Path, how: str) -> None:
    publish_trained_bundle(model_dir, seed=1, version=V1)
    with running_app(model_dir) as client:
        assert served_version(client) == V1
        before = ttfts(client)
        publish_trained_bundle(
            model_dir, ModelType.LIGHTGBM, ObjectiveType.MEAN, seed=2, version=V2
        )
        if how == "reload":
            reloaded = client.post("/reload").json()
            assert reloaded["model_version"] == V2 and reloaded["is_ready"] is True
            assert reloaded["last_load_time"].endswith("Z")
        else:
            wait_serving(client, V2)
        status = client.get("/status").json()
        after = strict(client, ROWS)["predictions"]
        reloads = metric_value(client, "latency_model_reloads_total")
        info = metric_value(client, 'latency_model_loaded_info{version="' + V2 + '"}')
        old_info = metric_value(client, 'latency_model_loaded_info{version="' + V1 + '"}')
    assert status["model_version"] == V2 and status["model_type"] == "lightgbm"
    assert status["objective_type"] == "mean"
    assert {p["model_version"] for p in after} == {V2}
    assert [p["ttft_ms"] for p in after] != before
    assert reloads == 2.0  # V1 at start-up, then V2
    assert (info, old_info) == (1.0, None)


def test_reload_without_a_new_bundle_changes_nothing(model_dir: Path) -> None:
    publish_trained_bundle(model_dir, seed=1, version=V1)
    with running_app(model_dir) as client:
        before = ttfts(client)
        reloaded = client.post("/reload").json()
        assert (reloaded["loaded"], reloaded["synced"], reloaded["model_version"]) == (
            False,
            False,
            V1,
        )
        assert ttfts(client) == before


def test_cold_start_then_first_bundle_arrives(model_dir: Path) -> None:
    with running_app(model_dir) as client:
        assert served_version(client) == "cold-start-prior"
        publish_trained_bundle(model_dir, seed=3, version=V1)
        client.post("/reload")
        status = client.get("/status").json()
    assert status["model_version"] == V1
    assert status["models_exist"] == {"ttft_model": True, "tpot_model": True}
    assert status["cold_start"] is False


def test_corrupt_newer_bundle_is_refused(model_dir: Path, tmp_path: Path) -> None:
    publish_trained_bundle(model_dir, seed=1, version=V1)
    with running_app(model_dir) as client:
        before = ttfts(client)
        stage_corrupt_bundle(model_dir, tmp_path, V2)
        reloaded = client.post("/reload").json()
        eventually(
            lambda: V2 in client.get("/status").json()["refused_versions"],
            WAIT_S,
            "the corrupt bundle refused",
        )
        client.post("/reload")  # refused once, not retried
        status = client.get("/status").json()
        after = ttfts(client)
        refused = metric_value(client, "latency_model_refused_total")
        reloads = metric_value(client, "latency_model_reloads_total")
        # A good bundle published after the refusal is still picked up.
        publish_trained_bundle(model_dir, seed=4, version=V3)
        client.post("/reload")
        final = served_version(client)
    assert reloaded["loaded"] is False and reloaded["model_version"] == V1
    assert status["model_version"] == V1
    assert status["models_exist"] == {"ttft_model": True, "tpot_model": True}
    assert list(status["refused_versions"]) == [V2]
    assert "checksum" in status["refused_versions"][V2]
    assert after == before
    assert refused == 1.0 and reloads == 1.0
    assert final == V3


def test_corrupt_bundle_at_start_serves_the_prior(model_dir: Path, tmp_path: Path) -> None:
    stage_corrupt_bundle(model_dir, tmp_path, V1)
    with running_app(model_dir) as client:
        ready = client.get("/readyz")
        status = client.get("/status").json()
        refused = metric_value(client, "latency_model_refused_total")
        prediction = strict(client, ROWS[:1])["predictions"][0]
    assert ready.status_code == 200
    assert status["model_version"] == "cold-start-prior"
    assert list(status["refused_versions"]) == [V1]
    assert refused == 1.0
    assert prediction["ttft_ms"] > 0 and prediction["model_version"] == "cold-start-prior"


def test_metrics_expose_histogram_and_row_counters(model_dir: Path) -> None:
    publish_trained_bundle(model_dir, seed=1, version=V1)
    with running_app(model_dir) as client:
        strict(client, ROWS)
        text = client.get("/metrics").text
    assert "latency_predict_duration_seconds_bucket{" in text
    assert 'latency_predicted_rows_total{route="strict"} 16.0' in text
    assert "latency_model_refused_total 0.0" in text
    assert 'latency_model_loaded_info{version="' + V1 + '"} 1.0' in text


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="per-thread nice is Linux's")
def test_bundles_load_at_the_lowest_cpu_priority(model_dir: Path) -> None:
    """So a swap on a worker's one CPU does not take half of it from requests."""
    with running_app(model_dir) as client:
        watcher = app_of(client).state.pools.default.watcher
        assert client.portal is not None  # the app runs: the client is entered
        nice = client.portal.call(
            watcher._off_path, lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        )
        assert nice == LOWEST_PRIORITY
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < LOWEST_PRIORITY
