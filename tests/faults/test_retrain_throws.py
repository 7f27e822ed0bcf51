"""Retrains that throw in a real training server, with no test hook in the server.

The fault: after a first good publish, the model directory's `versions` folder is moved
aside and a regular file takes its name, so every export raises (mkdir of `versions` meets
a file: root cannot write through it either). New rows keep arriving, so every tick tries
again. The trainer must stay ready, show the failure streak, turn `degraded` after 3, keep
the published bundle CURRENT, and recover by itself once the folder is back.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from shared.artifact import VERSIONS_DIR, read_current_version
from shared.predictor import load_bundle
from tests.faults.helpers import (
    data_status,
    first_bundle,
    ingest,
    marked_rows,
    metric,
    new_trainer,
    present_metric,
    published_version,
    trainer_env,
)
from tests.polling import eventually

DEGRADED_AFTER = 3  # training_server.routes.ops.DEGRADED_AFTER_FAILURES


def test_failing_retrains_are_counted_then_recover(tmp_path: Path) -> None:
    model_dir = tmp_path / "models"
    trainer = new_trainer(tmp_path, trainer_env(tmp_path, f"sqlite:///{tmp_path / 'store.db'}"))
    versions, aside = model_dir / VERSIONS_DIR, model_dir / "versions.aside"
    try:
        trainer.start()
        pid = trainer.proc.pid if trainer.proc else None
        v1 = first_bundle(trainer)

        versions.rename(aside)
        versions.write_text("a regular file where the versions folder belongs\n")
        assert ingest(trainer.url, marked_rows(1_000_000, 200, seed=21)).status_code == 202
        seen: list[int] = []

        def streak() -> bool:
            ready = httpx.get(f"{trainer.url}/readyz", timeout=5)
            assert ready.status_code == 200  # a failing retrain never costs readiness
            assert read_current_version(model_dir) == v1
            consecutive: int = data_status(trainer.url)["retrain_failures"]["consecutive"]
            health = httpx.get(f"{trainer.url}/healthz", timeout=5).json()
            assert health["consecutive_retrain_failures"] >= consecutive  # read just after
            degraded = health["consecutive_retrain_failures"] >= DEGRADED_AFTER
            assert health["status"] == ("degraded" if degraded else "ok")
            seen.append(consecutive)
            return consecutive >= DEGRADED_AFTER

        eventually(streak, 30, f"{DEGRADED_AFTER} failed retrains in a row", interval=0.1)
        status = data_status(trainer.url)
        failures = status["retrain_failures"]
        assert failures["consecutive"] >= DEGRADED_AFTER
        assert failures["total"] == failures["consecutive"]
        assert failures["last_error"].startswith("FileExistsError")
        assert status["model_version"] == v1
        assert status["last_retrain_detail"]["version"] == v1  # the last success, still shown
        assert httpx.get(f"{trainer.url}/healthz").json()["status"] == "degraded"
        in_a_row = present_metric(trainer.url, "latency_retrain_consecutive_failures")
        assert in_a_row >= DEGRADED_AFTER
        failed = present_metric(trainer.url, 'latency_retrains_total{status="failed"}')
        assert failed >= DEGRADED_AFTER
        assert sorted(seen) == seen  # the streak only grew while the fault lasted
        history = httpx.get(f"{trainer.url}/retrains", params={"limit": 3}).json()["retrains"]
        assert [(r["status"], r["version"]) for r in history] == [("failed", None)] * 3
        assert read_current_version(model_dir) == v1

        print(f"streak seen {sorted(set(seen))}, last_error {failures['last_error'][:90]!r}")
        versions.unlink()
        aside.rename(versions)  # the fault removed: v1 is back where CURRENT says
        assert load_bundle(model_dir, v1).version == v1
        v2 = eventually(
            lambda: (v := data_status(trainer.url)["model_version"]) != v1 and v,
            20,
            "the next retrain succeeds on its own",
        )
        status = data_status(trainer.url)
        assert status["retrain_failures"]["consecutive"] == 0
        assert status["retrain_failures"]["last_error"] is None
        assert status["retrain_failures"]["total"] >= DEGRADED_AFTER
        assert httpx.get(f"{trainer.url}/healthz").json()["status"] == "ok"
        assert metric(trainer.url, "latency_retrain_consecutive_failures") == 0.0
        assert read_current_version(model_dir) == v2
        assert published_version(model_dir) == v2
        assert trainer.proc is not None and trainer.proc.pid == pid  # no restart
    finally:
        trainer.stop()
