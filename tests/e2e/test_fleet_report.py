"""Real processes on 127.0.0.1: a prediction server that knows TRAINING_SERVER_URL reports the
version it serves to the trainer, and one whose trainer is gone serves on regardless."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row, synthetic_rows
from tests.polling import eventually


def trainer_env(tmp_path: Path) -> dict[str, str]:
    return {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_N_ESTIMATORS": "10",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
        "LATENCY_EARLY_RETRAINS": "false",
    }


def retrain(trainer: ServerProcess, seed: int) -> str:
    rows = {"entries": synthetic_rows(300, seed=seed)}
    response = httpx.post(f"{trainer.url}/add_training_data_bulk", json=rows, timeout=30)
    assert response.status_code == 202, response.text
    assert httpx.post(f"{trainer.url}/retrain", timeout=60).json()["outcome"] == "ok"
    version: str = httpx.get(f"{trainer.url}/data/status", timeout=10).json()["model_version"]
    return version


def listed_on(trainer: ServerProcess, version: str) -> dict[str, Any] | None:
    servers = httpx.get(f"{trainer.url}/prediction_servers", timeout=5).json()["servers"]
    return next((s for s in servers if s["model_version"] == version), None)


def test_the_trainer_lists_each_prediction_server_with_its_version(tmp_path: Path) -> None:
    env = trainer_env(tmp_path)
    trainer = ServerProcess("training_server", free_port(), env, tmp_path / "t.log").start()
    predictor = ServerProcess(
        "prediction_server",
        free_port(),
        {
            **env,
            "TRAINING_SERVER_URL": trainer.url,
            "MODEL_SYNC_INTERVAL_SEC": "1",
            "LATENCY_WORKERS": "1",  # one process: one report id, this server's /status pid
        },
        tmp_path / "p.log",
    )
    try:
        first = retrain(trainer, seed=1)
        predictor.start()
        server = eventually(lambda: listed_on(trainer, first), 20, f"a report of {first}")
        pid = httpx.get(f"{predictor.url}/status", timeout=5).json()["worker_pid"]
        assert server["id"].endswith(f"/{pid}")
        assert server["on_current_version"] is True and server["is_ready"] is True
        assert server["stale"] is False and server["stale_after_s"] == 3.0

        second = retrain(trainer, seed=2)  # the shared model directory: it swaps, then says so
        server = eventually(lambda: listed_on(trainer, second), 20, f"a report of {second}")
        assert server["on_current_version"] is True and server["loaded_at"].endswith("Z")
        assert len(httpx.get(f"{trainer.url}/prediction_servers", timeout=5).json()["servers"]) == 1

        predictor.stop()  # silent from now on: stale after 3 missed reports

        def stale() -> bool:
            listed = listed_on(trainer, second)
            assert listed is not None, "the stopped server is still listed"
            is_stale: bool = listed["stale"]
            return is_stale

        eventually(stale, 15, "the stopped server stale")
    finally:
        predictor.stop()
        trainer.stop()


def test_reports_to_an_absent_trainer_cost_serving_nothing(tmp_path: Path) -> None:
    predictor = ServerProcess(
        "prediction_server",
        free_port(),
        {
            "LATENCY_MODEL_DIR": str(tmp_path / "models"),
            "LATENCY_WORKERS": "1",
            "TRAINING_SERVER_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens there
            "MODEL_SYNC_INTERVAL_SEC": "0.2",
        },
        tmp_path / "p.log",
    ).start()
    try:

        def report_errors() -> float | None:
            text = httpx.get(f"{predictor.url}/metrics", timeout=5).text
            line = next(
                x for x in text.splitlines() if x.startswith("latency_fleet_report_errors_total ")
            )
            return float(line.split()[1]) >= 3 or None

        eventually(report_errors, 20, "three failed reports counted")
        reply = httpx.post(f"{predictor.url}/predict", json=prediction_row(), timeout=5)
        assert reply.status_code == 200 and reply.json()["ttft_ms"] > 0
        assert httpx.get(f"{predictor.url}/readyz", timeout=5).status_code == 200
    finally:
        predictor.stop()
