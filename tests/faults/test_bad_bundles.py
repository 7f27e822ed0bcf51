"""Broken bundles published as CURRENT against a real prediction server process.

tests/prediction_server/test_reload.py covers one flipped model byte (in-process). Here
each other way a bundle can be broken is published, one at a time, to one real server:
it must refuse it, keep serving the last good version with unchanged predictions, stay
ready, count the refusal exactly once, and still take the next good bundle.

Every broken bundle is derived from a bundle trained on other data than the served one, so
serving it by mistake would change the predictions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from shared.artifact import MANIFEST, bundle_dir_for, publish_pointer
from shared.features import feature_names
from shared.targets import Target
from tests.conftest import publish_trained_bundle
from tests.faults.helpers import answer, metric, present_metric
from tests.polling import eventually
from tests.prediction_server.helpers import epp_rows

SERVED = "20260101T000000.000000Z"  # trained on seed 1
OTHER = "20260102T000000.000000Z"  # trained on seed 2: the material of every broken bundle
SYNC_SEC = 0.1
ROWS = epp_rows(8, seed=50)


class Library:
    """The two trained bundles, fitted once, in a scratch model directory."""

    def __init__(self, root: Path):
        self.root = root
        publish_trained_bundle(root, seed=1, version=SERVED, rows=300)
        publish_trained_bundle(root, seed=2, version=OTHER, rows=300)
        self.count = 0

    def stage(self, model_dir: Path, source: str) -> tuple[str, Path]:
        """A copy of `source` under a new, newer version name (manifest updated to match)."""
        self.count += 1
        version = f"20260301T{self.count:06d}.000000Z"
        target = bundle_dir_for(model_dir, version)
        shutil.copytree(bundle_dir_for(self.root, source), target)
        manifest = json.loads((target / MANIFEST).read_text())
        manifest.update(version=version, created_at=datetime.now(UTC).isoformat())
        (target / MANIFEST).write_text(json.dumps(manifest))
        return version, target


def _manifest(bundle: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((bundle / MANIFEST).read_text())
    return manifest


def _write_manifest(bundle: Path, manifest: dict[str, Any]) -> None:
    (bundle / MANIFEST).write_text(json.dumps(manifest))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def truncated_model(bundle: Path) -> None:
    """The TTFT model cut in half, its checksum updated: the loader itself must refuse it."""
    manifest = _manifest(bundle)
    model = bundle / manifest["targets"]["ttft"]["file"]
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    manifest["targets"]["ttft"]["sha256"] = _sha(model)
    _write_manifest(bundle, manifest)


def checksum_mismatch(bundle: Path) -> None:
    """Model files intact, the manifest's TPOT checksum is another file's."""
    manifest = _manifest(bundle)
    manifest["targets"]["tpot"]["sha256"] = hashlib.sha256(b"another file").hexdigest()
    _write_manifest(bundle, manifest)


def missing_file(bundle: Path) -> None:
    manifest = _manifest(bundle)
    manifest["targets"]["ttft"]["file"] = "ttft-never-written.json"
    _write_manifest(bundle, manifest)


def wrong_feature_count(bundle: Path) -> None:
    """The TTFT model is the TPOT one (fewer features), checksum updated; the manifest
    lists the TTFT features."""
    manifest = _manifest(bundle)
    ttft = bundle / manifest["targets"]["ttft"]["file"]
    shutil.copyfile(bundle / manifest["targets"]["tpot"]["file"], ttft)
    manifest["targets"]["ttft"]["sha256"] = _sha(ttft)
    _write_manifest(bundle, manifest)


def manifest_not_json(bundle: Path) -> None:
    text = (bundle / MANIFEST).read_text()
    (bundle / MANIFEST).write_text(text[: len(text) // 2])  # cut mid-document


def manifest_is_a_directory(bundle: Path) -> None:
    """Unreadable as a file, whoever reads it (root included)."""
    (bundle / MANIFEST).unlink()
    (bundle / MANIFEST).mkdir()


BREAKERS: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated-model": (truncated_model, "cannot load"),
    "checksum-mismatch": (checksum_mismatch, "checksum mismatch"),
    "manifest-names-a-missing-file": (missing_file, "missing model file"),
    "wrong-feature-count": (
        wrong_feature_count,
        f"has {len(feature_names(Target.TPOT))} features, "
        f"manifest lists {len(feature_names(Target.TTFT))}",
    ),
    "manifest-not-json": (manifest_not_json, "invalid manifest"),
    "manifest-is-a-directory": (manifest_is_a_directory, "manifest"),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return Library(tmp_path_factory.mktemp("library"))


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, library: Library
) -> Iterator[tuple[ServerProcess, Path]]:
    """One prediction server for the module, started on a good bundle."""
    root = tmp_path_factory.mktemp("bad-bundles")
    model_dir = root / "models"
    shutil.copytree(bundle_dir_for(library.root, SERVED), bundle_dir_for(model_dir, SERVED))
    publish_pointer(model_dir, SERVED)
    env = {
        "LATENCY_MODEL_DIR": str(model_dir),
        "MODEL_SYNC_INTERVAL_SEC": str(SYNC_SEC),
        "LATENCY_WORKERS": "1",
    }  # one process: /status and /metrics speak for the server
    server = ServerProcess("prediction_server", free_port(), env, root / "prediction.log")
    try:
        server.start()
        yield server, model_dir
    finally:
        server.stop()


def status(server: ServerProcess) -> dict[str, Any]:
    reply = httpx.get(f"{server.url}/status", timeout=10)
    assert reply.status_code == 200
    body: dict[str, Any] = reply.json()
    return body


@pytest.mark.parametrize("kind", list(BREAKERS))
def test_broken_bundle_is_refused_once_and_the_last_good_keeps_serving(
    served: tuple[ServerProcess, Path], library: Library, kind: str
) -> None:
    server, model_dir = served
    breaker, reason = BREAKERS[kind]
    good_version, good_answer = answer(server, ROWS)
    refused_before = present_metric(server.url, "latency_model_refused_total")

    bad, bundle = library.stage(model_dir, OTHER)
    breaker(bundle)
    publish_pointer(model_dir, bad)
    refused = eventually(
        lambda: status(server)["refused_versions"].get(bad),
        10,
        f"the server refuses the {kind} bundle",
    )
    assert reason in refused
    time.sleep(5 * SYNC_SEC)  # several more polls of the same CURRENT

    assert answer(server, ROWS) == (good_version, good_answer)
    current = status(server)
    assert current["model_version"] == good_version
    assert current["models_exist"] == {"ttft_model": True, "tpot_model": True}
    ready = httpx.get(f"{server.url}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["model_version"] == good_version
    assert metric(server.url, "latency_model_refused_total") == refused_before + 1
    assert metric(server.url, "latency_model_watch_errors_total") == 0.0

    # The watcher is alive: the next good bundle is taken (the same models as served).
    good, _ = library.stage(model_dir, SERVED)
    publish_pointer(model_dir, good)
    eventually(
        lambda: status(server)["model_version"] == good, 10, "the next good bundle is served"
    )
    assert answer(server, ROWS) == (good, good_answer)
    assert metric(server.url, "latency_model_refused_total") == refused_before + 1


def test_pointer_outside_the_versions_folder_or_to_nothing_is_refused(
    served: tuple[ServerProcess, Path],
) -> None:
    server, model_dir = served
    good_version, good_answer = answer(server, ROWS)
    refused_before = present_metric(server.url, "latency_model_refused_total")
    for bad in ("20990101T000000.000000Z", "../../etc"):  # no such folder; an escape
        publish_pointer(model_dir, bad)

        def refused(version: str = bad) -> bool:
            return version in status(server)["refused_versions"]

        eventually(refused, 10, f"the server refuses CURRENT={bad!r}")
    assert answer(server, ROWS) == (good_version, good_answer)
    assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200
    assert metric(server.url, "latency_model_refused_total") == refused_before + 2


def test_server_starts_on_an_unreadable_bundle_and_serves_the_prior(
    tmp_path: Path, library: Library
) -> None:
    model_dir = tmp_path / "models"
    bad, bundle = library.stage(model_dir, SERVED)
    manifest_is_a_directory(bundle)
    publish_pointer(model_dir, bad)
    env = {
        "LATENCY_MODEL_DIR": str(model_dir),
        "MODEL_SYNC_INTERVAL_SEC": str(SYNC_SEC),
        "LATENCY_WORKERS": "1",
    }
    server = ServerProcess("prediction_server", free_port(), env, tmp_path / "prediction.log")
    try:
        server.start(ready_timeout=20)
        version, _ = answer(server, ROWS)
        assert version == "cold-start-prior"
        assert bad in status(server)["refused_versions"]
        assert metric(server.url, "latency_model_refused_total") == 1.0
    finally:
        server.stop()
