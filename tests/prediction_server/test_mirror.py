"""Writing a mirrored bundle: the workers of one server import it once between them, and
the directory is marked as a mirror, so that a restart goes on mirroring."""

from __future__ import annotations

import threading
from pathlib import Path

from devkit.synthetic import publish_trained_bundle
from prediction_server.mirror import import_mirrored
from shared.archive import pack_bundle
from shared.artifact import bundle_dir_for, read_current_version
from shared.model_source import MIRROR_MARKER, ModelSource
from shared.settings import PredictionSettings

VERSION = "20260501T000000.000000Z"
URL = "http://127.0.0.1:8000"


def archive_of(tmp_path: Path) -> bytes:
    source = tmp_path / "trainer"
    source.mkdir()
    publish_trained_bundle(source, seed=5, version=VERSION)
    return pack_bundle(bundle_dir_for(source, VERSION), {"model_version": VERSION})


def test_workers_racing_for_one_version_import_it_once(tmp_path: Path) -> None:
    archive, models = archive_of(tmp_path), tmp_path / "models"
    start = threading.Barrier(4)
    results: list[bool] = []

    def worker() -> None:
        start.wait(10)
        imported = import_mirrored(models, archive, VERSION, URL)
        results.append(imported is not None and imported.version == VERSION)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [False, False, False, True]
    assert read_current_version(models) == VERSION
    assert [p.name for p in (models / "versions").iterdir()] == [VERSION]  # no staging left
    assert (models / MIRROR_MARKER).read_text().strip() == URL


def test_a_restarted_server_sees_its_mirror_and_goes_on_mirroring(tmp_path: Path) -> None:
    models = tmp_path / "models"
    imported = import_mirrored(models, archive_of(tmp_path), VERSION, URL)
    assert imported is not None and imported.version == VERSION
    settings = PredictionSettings(model_dir=models, training_server_url=URL)
    assert settings.model_source is ModelSource.TRAINER_SYNC
    assert settings.sync_from_trainer is True
