"""Export into a model directory where the last step cannot be written.

No mounts (so no tiny tmpfs to fill) and root ignores file modes, so the fault is a path
that cannot be created: a directory (holding a file) planted where the trainer writes the
temporary file that replaces CURRENT (`.CURRENT.<pid>.tmp`, shared.artifact.replace_file).
That is the export's very last step: the new version's folder is complete by then, so this
is where a half-published bundle could leak. It must not: CURRENT keeps naming the
previous, loadable bundle, the retrain is counted as failed, no unpublished folder is left
behind, and once the path is free again the next retrain publishes.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from shared.artifact import CURRENT_POINTER, VERSIONS_DIR, read_current_version
from tests.faults.helpers import (
    data_status,
    first_bundle,
    ingest,
    marked_rows,
    new_trainer,
    present_metric,
    published_version,
    trainer_env,
)
from tests.polling import eventually


def bundle_folders(model_dir: Path) -> list[str]:
    return sorted(p.name for p in (model_dir / VERSIONS_DIR).iterdir())


def test_pointer_that_cannot_be_written_publishes_nothing(tmp_path: Path) -> None:
    model_dir = tmp_path / "models"
    trainer = new_trainer(tmp_path, trainer_env(tmp_path, f"sqlite:///{tmp_path / 'store.db'}"))
    try:
        trainer.start()
        assert trainer.proc is not None
        v1 = first_bundle(trainer)
        before = bundle_folders(model_dir)
        assert before == [v1]

        blocker = model_dir / f".{CURRENT_POINTER}.{trainer.pid}.tmp"
        blocker.mkdir()
        (blocker / "keep").write_text("makes the path neither writable nor removable as a file")
        assert ingest(trainer.url, marked_rows(1_000_000, 200, seed=31)).status_code == 202

        failures = eventually(
            lambda: (f := data_status(trainer.url)["retrain_failures"])["consecutive"] >= 2 and f,
            20,
            "two retrains fail on the pointer",
        )
        assert failures["last_error"].startswith("IsADirectoryError")
        assert httpx.get(f"{trainer.url}/readyz").status_code == 200
        assert present_metric(trainer.url, "latency_retrain_consecutive_failures") >= 2
        assert read_current_version(model_dir) == v1
        assert published_version(model_dir) == v1
        assert data_status(trainer.url)["model_version"] == v1
        # Each failed attempt wrote a whole version folder before the pointer failed; none
        # may stay behind (readers never saw it), or a long fault fills the disk.
        assert bundle_folders(model_dir) == before

        (blocker / "keep").unlink()
        blocker.rmdir()
        v2 = eventually(
            lambda: (v := data_status(trainer.url)["model_version"]) != v1 and v,
            20,
            "the next retrain publishes once the path is free",
        )
        assert read_current_version(model_dir) == v2
        assert published_version(model_dir) == v2
        assert data_status(trainer.url)["retrain_failures"]["consecutive"] == 0
        assert bundle_folders(model_dir) == [v1, v2]
    finally:
        trainer.stop()
