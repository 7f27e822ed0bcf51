"""LATENCY_SYNC_FROM_TRAINER: mirror bundles from a trainer over real HTTP (no shared volume).

The trainer here is a real HTTP server on 127.0.0.1 answering the two routes the watcher
reads, /model/download/info and /model/export, with archives packed by shared.archive.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.archive import pack_bundle
from shared.artifact import MANIFEST, bundle_dir_for
from shared.live_calibration import LiveCalibration, TargetLiveCalibration
from shared.targets import Target
from tests.conftest import publish_trained_bundle
from tests.factories import make_tar
from tests.polling import eventually
from tests.prediction_server.helpers import (
    WAIT_S,
    FakeTrainerHandler,
    http_server,
    metric_value,
    running_app,
    served_version,
    wait_serving,
)

V1 = "20260401T000000.000000Z"
V2 = "20260402T000000.000000Z"
V3 = "20260403T000000.000000Z"


class FakeTrainer:
    def __init__(self) -> None:
        self.version: str | None = None
        self.archive = b""
        self.exports = 0
        self.infos = 0  # GET /model/download/info: one per sync poll
        self.calibration: bytes | None = None  # /calibration; None answers 404

    def offer(self, version: str, archive: bytes) -> None:
        self.archive = archive  # first: /info must never announce a version not yet offered
        self.version = version


@pytest.fixture
def trainer() -> Iterator[tuple[FakeTrainer, str]]:
    state = FakeTrainer()

    class Handler(FakeTrainerHandler):
        def do_GET(self) -> None:
            if self.path == "/model/download/info":
                state.infos += 1
                body, kind = json.dumps({"model_version": state.version}).encode(), "json"
            elif self.path == "/model/export" and state.version:
                state.exports += 1
                body, kind = state.archive, "gzip"
            elif self.path == "/calibration" and state.calibration is not None:
                body, kind = state.calibration, "json"
            else:
                self.send_error(404)
                return
            self.reply(body, kind)

    with http_server(Handler) as url:
        yield state, url


def trained_archive(tmp_path: Path, version: str, seed: int) -> bytes:
    source = tmp_path / f"trainer-{version}"
    source.mkdir()
    publish_trained_bundle(source, seed=seed, version=version)
    return pack_bundle(bundle_dir_for(source, version), {"model_version": version})


def tampered_archive(tmp_path: Path, version: str) -> bytes:
    """A well-formed archive whose ttft model no longer matches its manifest checksum."""
    source = tmp_path / f"trainer-{version}"
    source.mkdir()
    publish_trained_bundle(source, seed=7, version=version)
    bundle = bundle_dir_for(source, version)
    members = {p.name: p.read_bytes() for p in bundle.iterdir()}
    data = bytearray(members["ttft.json"])
    data[len(data) // 2] ^= 0x01
    return make_tar({**members, "ttft.json": bytes(data)})


def corrupt_stream_archive() -> bytes:
    """Valid gzip header, then a deflate stream broken mid-way (see tests/shared/test_archive)."""
    rng = random.Random(0)
    payload = "".join(
        f'"{rng.random():.6f}": [{rng.randint(0, 999)}, "split"],\n' for _ in range(3000)
    ).encode()
    archive = bytearray(make_tar({MANIFEST: payload}))
    archive[int(len(archive) * 0.2)] ^= 0xFF
    return bytes(archive)


def sync_app(model_dir: Path, url: str) -> AbstractContextManager[TestClient]:
    return running_app(model_dir, sync_from_trainer=True, training_server_url=url)


def test_bundles_are_mirrored_from_the_trainer(
    model_dir: Path, tmp_path: Path, trainer: tuple[FakeTrainer, str]
) -> None:
    state, url = trainer
    with sync_app(model_dir, url) as client:
        assert served_version(client) == "cold-start-prior"
        state.offer(V1, trained_archive(tmp_path, V1, seed=1))
        wait_serving(client, V1)
        first = client.post(
            "/predict/bulk/strict",
            json={
                "requests": [
                    {
                        "kv_cache_percentage": 0.5,
                        "input_token_length": 4000,
                        "num_request_waiting": 1,
                        "num_request_running": 8,
                        "num_tokens_generated": 1,
                        "prefix_cache_score": 0.0,
                    }
                ]
            },
        ).json()["predictions"][0]
        state.offer(V2, trained_archive(tmp_path, V2, seed=2))
        wait_serving(client, V2)
        status = client.get("/status").json()
    assert first["model_version"] == V1 and first["ttft_ms"] > 0
    assert status["training_server_url"] == url
    assert status["models_exist"] == {"ttft_model": True, "tpot_model": True}
    assert (model_dir / "CURRENT").read_text().strip() == V2
    assert bundle_dir_for(model_dir, V1).is_dir() and bundle_dir_for(model_dir, V2).is_dir()


def test_tampered_archive_is_refused_and_sync_goes_on(
    model_dir: Path, tmp_path: Path, trainer: tuple[FakeTrainer, str]
) -> None:
    state, url = trainer
    state.offer(V1, trained_archive(tmp_path, V1, seed=1))
    with sync_app(model_dir, url) as client:
        wait_serving(client, V1)
        state.offer(V2, tampered_archive(tmp_path, V2))
        eventually(
            lambda: (metric_value(client, "latency_model_refused_total") or 0) >= 1,
            WAIT_S,
            "the tampered archive refused",
        )
        assert served_version(client) == V1
        assert not bundle_dir_for(model_dir, V2).exists()
        assert V2 in client.get("/status").json()["refused_versions"]
        exports, infos = state.exports, state.infos

        def polled_without_downloading() -> bool:
            assert state.exports == exports  # a refused version is not downloaded again
            return state.infos >= infos + 5

        eventually(polled_without_downloading, WAIT_S, "five more polls of the trainer")
        state.offer(V3, trained_archive(tmp_path, V3, seed=3))
        wait_serving(client, V3)


def test_a_mirrored_bundle_of_a_newer_format_is_refused_saying_so(
    model_dir: Path, tmp_path: Path, trainer: tuple[FakeTrainer, str]
) -> None:
    """A trainer upgraded first offers a bundle of format 2: refused (never published
    locally), and GET /status says a newer server is needed."""
    state, url = trainer
    state.offer(V1, trained_archive(tmp_path, V1, seed=1))
    source = tmp_path / "trainer-newer"
    publish_trained_bundle(source, seed=4, version=V2)
    members = {p.name: p.read_bytes() for p in bundle_dir_for(source, V2).iterdir()}
    manifest = {**json.loads(members[MANIFEST]), "format_version": 2}
    with sync_app(model_dir, url) as client:
        wait_serving(client, V1)
        state.offer(V2, make_tar({**members, MANIFEST: json.dumps(manifest).encode()}))
        eventually(
            lambda: client.get("/status").json()["needs_newer_server"],
            WAIT_S,
            "the newer bundle refused",
        )
        status = client.get("/status").json()
    assert status["model_version"] == V1
    assert status["needs_newer_server"] == {"version": V2, "bundle_format": 2, "reads_up_to": 1}
    assert "reads bundle format 2" in status["refused_versions"][V2]
    assert not bundle_dir_for(model_dir, V2).exists()


def test_watcher_survives_an_archive_with_a_broken_stream(
    model_dir: Path, tmp_path: Path, trainer: tuple[FakeTrainer, str]
) -> None:
    """Regression: zlib.error once escaped import_bundle and killed the watcher task."""
    state, url = trainer
    state.offer(V1, trained_archive(tmp_path, V1, seed=1))
    with sync_app(model_dir, url) as client:
        wait_serving(client, V1)
        state.offer(V2, corrupt_stream_archive())
        # V1 once, then the broken V2
        eventually(lambda: state.exports >= 2, WAIT_S, "the broken archive downloaded")
        state.offer(V3, trained_archive(tmp_path, V3, seed=3))
        wait_serving(client, V3, 5.0)


def test_live_calibration_is_mirrored_and_applied(
    model_dir: Path, tmp_path: Path, trainer: tuple[FakeTrainer, str]
) -> None:
    state, url = trainer
    state.offer(V1, trained_archive(tmp_path, V1, seed=1))
    row = {
        "kv_cache_percentage": 0.5,
        "input_token_length": 4000,
        "num_request_waiting": 1,
        "num_request_running": 8,
        "num_tokens_generated": 1,
        "prefix_cache_score": 0.0,
    }

    def answer(client: TestClient) -> dict[str, Any]:
        body: dict[str, Any] = client.post("/predict", json=row).json()
        return body

    with sync_app(model_dir, url) as client:
        wait_serving(client, V1)
        plain = answer(client)
        state.calibration = live_calibration_json(ttft=0.5, tpot=-0.25)
        eventually(
            lambda: (model_dir / "calibration.json").is_file(),
            WAIT_S,
            "the trainer's calibration mirrored",
        )
        eventually(
            lambda: answer(client)["ttft_ms"] != plain["ttft_ms"],
            WAIT_S,
            "answers corrected by the live calibration",
        )
        corrected = answer(client)
        state.calibration = None  # the trainer stopped publishing one: back to the bundle's
        eventually(
            lambda: not (model_dir / "calibration.json").exists(),
            WAIT_S,
            "the mirrored calibration removed",
        )
        eventually(
            lambda: answer(client)["ttft_ms"] == plain["ttft_ms"],
            WAIT_S,
            "the bundle's own answers back",
        )
    assert corrected["ttft_ms"] == pytest.approx(plain["ttft_ms"] * math.exp(0.5), rel=1e-6)
    assert corrected["tpot_ms"] == pytest.approx(plain["tpot_ms"] * math.exp(-0.25), rel=1e-6)
    assert corrected["model_version"] == V1


def live_calibration_json(
    *,
    ttft: float,
    tpot: float,
    quantile: float = 0.9,
    groups: dict[str, dict[Target, float]] | None = None,
    bundle_version: str | None = None,
) -> bytes:
    return (
        LiveCalibration(
            updated_at=datetime.now(UTC),
            quantile=quantile,
            through_sample_id=1,
            bundle_version=bundle_version,
            targets={
                Target.TTFT: TargetLiveCalibration(log_offset=ttft),
                Target.TPOT: TargetLiveCalibration(log_offset=tpot),
            },
            groups={
                name: {t: TargetLiveCalibration(log_offset=v) for t, v in offsets.items()}
                for name, offsets in (groups or {}).items()
            },
        )
        .model_dump_json()
        .encode()
    )
