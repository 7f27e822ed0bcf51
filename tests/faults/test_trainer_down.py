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
)
from tests.polling import eventually
from tests.prediction_server.helpers import epp_rows

SYNC_SEC = 0.2
FAILED_SYNCS = 15  # the outage: at one poll per SYNC_SEC, 3 s at least
CLEAN_POLLS = 4  # after the restart: polls with no sync error
ROWS = epp_rows(8, seed=60)
SYNC_ERRORS = "latency_model_sync_errors_total"


def last_report(trainer: ServerProcess) -> str | None:
    """When the trainer last heard from the (one) prediction server: it reports after
    every poll."""
    servers = httpx.get(f"{trainer.url}/prediction_servers", timeout=5).json()["servers"]
    assert len(servers) <= 1, servers
    return servers[0]["last_seen"] if servers else None


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
        eventually(
            lambda: answer(predictor, ROWS)[0] == v1, 20, "the predictor mirrors the first bundle"
        )
        before = answer(predictor, ROWS)
        errors_before = present_metric(predictor.url, SYNC_ERRORS)

        trainer.kill()
        killed_at = time.monotonic()
        aged: list[tuple[float, float]] = []  # (seconds since the kill, model age) per poll

        def serving_on_through_failed_syncs() -> bool:
            assert answer(predictor, ROWS) == before
            ready = httpx.get(f"{predictor.url}/readyz", timeout=5)
            assert ready.status_code == 200 and ready.json()["model_version"] == v1
            state = httpx.get(f"{predictor.url}/status", timeout=5).json()
            assert state["model_version"] == v1 and state["cold_start"] is False
            aged.append((time.monotonic() - killed_at, state["model_age_seconds"]))
            return present_metric(predictor.url, SYNC_ERRORS) - errors_before >= FAILED_SYNCS

        # The outage lasts until the predictor has counted FAILED_SYNCS failed syncs (its
        # polls, proven to happen), serving the same answers at every check meanwhile.
        eventually(
            serving_on_through_failed_syncs,
            60,
            f"{FAILED_SYNCS} failed syncs counted while the trainer is down",
            interval=0.5,
        )
        down_s = time.monotonic() - killed_at
        errors_down = present_metric(predictor.url, SYNC_ERRORS)
        ages = [age for _, age in aged]
        assert ages == sorted(ages)  # the same bundle, aging with the clock
        assert ages[-1] - ages[0] >= aged[-1][0] - aged[0][0] - 1.0, aged
        assert metric(predictor.url, "latency_model_watch_errors_total") == 0.0

        trainer.start()  # same store, same model folder, same port
        assert data_status(trainer.url)["model_version"] == v1  # resumed, not retrained
        assert ingest(trainer.url, marked_rows(5_000_000, 200, seed=12)).status_code == 202
        v2 = eventually(
            lambda: v if (v := answer(predictor, ROWS)[0]) != v1 else None,
            30,
            "the predictor mirrors a bundle from the restarted trainer",
        )
        assert v2 > v1  # versions sort by time
        settled = metric(predictor.url, SYNC_ERRORS)
        reports = {last_report(trainer)}

        def polls_without_sync_errors() -> bool:
            assert metric(predictor.url, SYNC_ERRORS) == settled  # syncing cleanly again
            reports.add(last_report(trainer))  # a report ends each poll, after its sync
            return len(reports) > CLEAN_POLLS

        eventually(polls_without_sync_errors, 30, f"{CLEAN_POLLS} more polls of the predictor")
        print(
            f"down {down_s:.1f}s: sync errors {errors_before} -> {errors_down}, model age "
            f"{ages[0]:.1f} -> {ages[-1]:.1f}s; after restart {v1} -> {v2}"
        )
    finally:
        predictor.stop()
        trainer.stop()
