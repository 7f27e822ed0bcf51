"""A bundle that needs a newer prediction server (a trainer upgraded first): refused, the
last bundle keeps serving, and GET /status (`needs_newer_server`) and /metrics
(`latency_bundle_format_needed`, `latency_bundle_format_supported`) say why, until a later
bundle this server reads is served."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.artifact import MANIFEST, bundle_dir_for, publish_pointer
from tests.conftest import publish_trained_bundle
from tests.polling import eventually
from tests.prediction_server.helpers import (
    WAIT_S,
    epp_rows,
    metric_value,
    running_app,
    strict,
    wait_serving,
)

V1 = "20260501T000000.000000Z"
V2 = "20260502T000000.000000Z"
V3 = "20260503T000000.000000Z"
ROWS = epp_rows(8, seed=21)


def format_2(raw: dict[str, Any]) -> None:
    raw["format_version"] = 2
    raw["a_field_of_format_2"] = True  # a newer format may add fields


def newer_feature(raw: dict[str, Any]) -> None:
    raw["targets"]["ttft"]["features"][0] = "a_feature_of_a_newer_trainer"


def stage_newer_bundle(model_dir: Path, tmp_path: Path, version: str, edit: Any) -> None:
    """A real trained bundle with its manifest edited (the manifest lists the model files'
    sha256, not its own: nothing to re-checksum), then CURRENT pointed at it."""
    scratch = tmp_path / f"scratch-{version}"
    publish_trained_bundle(scratch, seed=8, version=version)
    target = bundle_dir_for(model_dir, version)
    shutil.copytree(bundle_dir_for(scratch, version), target)
    raw = json.loads((target / MANIFEST).read_text())
    edit(raw)
    (target / MANIFEST).write_text(json.dumps(raw))
    publish_pointer(model_dir, version)


def refused(client: TestClient, version: str) -> str | None:
    reason: str | None = client.get("/status").json()["refused_versions"].get(version)
    return reason


@pytest.mark.parametrize(("edit", "bundle_format"), [(format_2, 2), (newer_feature, 1)])
def test_the_last_bundle_serves_and_status_and_metrics_say_why(
    model_dir: Path, tmp_path: Path, edit: Any, bundle_format: int
) -> None:
    publish_trained_bundle(model_dir, seed=1, version=V1)
    with running_app(model_dir) as client:
        status = client.get("/status").json()
        assert status["needs_newer_server"] is None
        assert metric_value(client, "latency_bundle_format_needed") == 0.0
        assert metric_value(client, "latency_bundle_format_supported") == 1.0
        before = strict(client, ROWS)

        stage_newer_bundle(model_dir, tmp_path, V2, edit)
        reason = eventually(lambda: refused(client, V2), WAIT_S, "the newer bundle refused")
        status = client.get("/status").json()
        after = strict(client, ROWS)
        needed = metric_value(client, "latency_bundle_format_needed")
        refusals = metric_value(client, "latency_model_refused_total")

        publish_trained_bundle(model_dir, seed=2, version=V3)  # one this server reads
        wait_serving(client, V3)
        later = client.get("/status").json()
        needed_later = metric_value(client, "latency_bundle_format_needed")
    assert status["model_version"] == V1  # kept, not the prior
    assert [p["ttft_ms"] for p in after["predictions"]] == [
        p["ttft_ms"] for p in before["predictions"]
    ]
    assert after["model_version"] == V1
    assert status["needs_newer_server"] == {
        "version": V2,
        "bundle_format": bundle_format,
        "reads_up_to": 1,
    }
    assert "needs a" in reason and "prediction server" in reason
    if bundle_format == 2:
        want = "needs a prediction server that reads bundle format 2; this one reads up to 1"
        assert reason == f"{V2}: {want}"
    else:
        assert "a_feature_of_a_newer_trainer" in reason
    assert (needed, refusals) == (float(bundle_format), 1.0)
    assert later["needs_newer_server"] is None and needed_later == 0.0
    assert list(later["refused_versions"]) == [V2]  # the record of the refusal stays


def test_a_newer_bundle_at_start_leaves_the_prior_serving(model_dir: Path, tmp_path: Path) -> None:
    stage_newer_bundle(model_dir, tmp_path, V1, format_2)
    with running_app(model_dir) as client:
        status = client.get("/status").json()
        needed = metric_value(client, "latency_bundle_format_needed")
    assert status["model_version"] == "cold-start-prior"
    assert status["needs_newer_server"] == {"version": V1, "bundle_format": 2, "reads_up_to": 1}
    assert needed == 2.0


def test_a_corrupt_bundle_does_not_ask_for_a_newer_server(model_dir: Path, tmp_path: Path) -> None:
    publish_trained_bundle(model_dir, seed=1, version=V1)
    with running_app(model_dir) as client:
        stage_newer_bundle(model_dir, tmp_path, V2, lambda raw: raw.update(quantile="high"))
        eventually(lambda: refused(client, V2), WAIT_S, "the broken bundle refused")
        status = client.get("/status").json()
        needed = metric_value(client, "latency_bundle_format_needed")
    assert status["model_version"] == V1
    assert status["needs_newer_server"] is None and needed == 0.0
