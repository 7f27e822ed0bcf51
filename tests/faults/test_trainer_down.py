"""The training server is SIGKILLed under a prediction server that mirrors bundles from it
(LATENCY_SYNC_FROM_TRAINER, no shared volume): predictions go on, unchanged, from the last
mirrored bundle; the failed syncs are counted; after the restart it mirrors again."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from devkit.processes import ServerProcess, free_port
from tests.faults.helpers import (
    answer,
    data_status,
    first_bundle,
    ingest,
    marked_rows,
    metric,
    new_trainer,
    present_metric,
    trainer_env,
    wait_until,
)
from tests.prediction_server.helpers import epp_rows

SYNC_SEC = 0.2
DOWN_SEC = 6.0
ROWS = epp_rows(8, seed=60)
SYNC_ERRORS = "latency_model_sync_errors_total"


def test_predictions_go_on_while_the_trainer_is_down_and_sync_resumes(tmp_path: Path) -> None:
    trainer = new_trainer(tmp_path, trainer_env(tmp_path, f"sqlite:///{tmp_path / 'store.db'}"))
    mirror_dir = tmp_path / "mirror"  # the prediction server's own folder: nothing shared
    predictor = ServerProcess(
        "prediction_server",
        free_port(),
        {
            "LATENCY_MODEL_DIR": str(mirror_dir),
            "LATENCY_SYNC_FROM_TRAINER": "1",
            "TRAINING_SERVER_URL": trainer.url,
            "MODEL_SYNC_INTERVAL_SEC": str(SYNC_SEC),
            "LATENCY_WORKERS": "1",
        },
        tmp_path / "prediction.log",
    )
    try:
        trainer.start()
        predictor.start()
        v1 = first_bundle(trainer)
        wait_until(
            lambda: answer(predictor, ROWS)[0] == v1, "the predictor mirrors the first bundle"
        )
        before = answer(predictor, ROWS)
        errors_before = present_metric(predictor.url, SYNC_ERRORS)

        trainer.kill()
        killed_at = time.monotonic()
        ages = []
        while time.monotonic() - killed_at < DOWN_SEC:
            assert answer(predictor, ROWS) == before
            ready = httpx.get(f"{predictor.url}/readyz", timeout=5)
            assert ready.status_code == 200 and ready.json()["model_version"] == v1
            state = httpx.get(f"{predictor.url}/status", timeout=5).json()
            assert state["model_version"] == v1 and state["cold_start"] is False
            ages.append(state["model_age_seconds"])
            time.sleep(0.5)
        assert ages == sorted(ages) and ages[-1] - ages[0] >= DOWN_SEC - 1.5
        errors_down = present_metric(predictor.url, SYNC_ERRORS)
        # One failed sync per poll, give or take the poll in progress.
        assert errors_down - errors_before >= DOWN_SEC / SYNC_SEC / 2
        assert metric(predictor.url, "latency_model_watch_errors_total") == 0.0

        trainer.start()  # same store, same model folder, same port
        assert data_status(trainer.url)["model_version"] == v1  # resumed, not retrained
        assert ingest(trainer.url, marked_rows(5_000_000, 200, seed=12)).status_code == 202
        v2 = wait_until(
            lambda: v if (v := answer(predictor, ROWS)[0]) != v1 else None,
            "the predictor mirrors a bundle from the restarted trainer",
            timeout=30,
        )
        assert v2 > v1  # versions sort by time
        settled = metric(predictor.url, SYNC_ERRORS)
        time.sleep(4 * SYNC_SEC)
        assert metric(predictor.url, SYNC_ERRORS) == settled  # syncing cleanly again
        print(
            f"down {DOWN_SEC}s: sync errors {errors_before} -> {errors_down}, model age "
            f"{ages[0]:.1f} -> {ages[-1]:.1f}s; after restart {v1} -> {v2}"
        )
    finally:
        predictor.stop()
        trainer.stop()
