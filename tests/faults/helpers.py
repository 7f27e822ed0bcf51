"""Shared by the fault-injection tests: real server processes, /metrics reads (waits:
tests.polling.eventually)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import synthetic_rows
from shared.predictor import load_current_bundle
from tests.polling import eventually

# The marker column: stored with every row but no feature of either model, so unique values
# per row identify rows without changing what the trainer learns.
MARKER = "decode_tokens_in_flight"


def trainer_env(tmp_path: Path, db_url: str, **extra: str) -> dict[str, str]:
    env = {
        "LATENCY_DB_URL": db_url,
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "1",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_N_ESTIMATORS": "10",
        "LATENCY_TRAIN_THREADS": "1",
        # Retention off in effect: the tests count rows.
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": "10000000",
        "LATENCY_MAX_TEST_DATA_SIZE": "10000000",
    }
    env.update(extra)
    return env


def published_version(model_dir: Path) -> str | None:
    """The version of the published bundle, loaded and verified; None when none is."""
    bundle = load_current_bundle(model_dir)
    return None if bundle is None else bundle.version


def new_trainer(tmp_path: Path, env: dict[str, str]) -> ServerProcess:
    return ServerProcess("training_server", free_port(), env, tmp_path / "training.log")


def marked_rows(first_marker: int, n: int, seed: int) -> list[dict[str, Any]]:
    rows = synthetic_rows(n, seed=seed)
    for i, row in enumerate(rows):
        row[MARKER] = first_marker + i
    return rows


def ingest(url: str, rows: list[dict[str, Any]], timeout: float = 10.0) -> httpx.Response:
    return httpx.post(f"{url}/add_training_data_bulk", json={"entries": rows}, timeout=timeout)


def data_status(url: str) -> dict[str, Any]:
    reply = httpx.get(f"{url}/data/status", timeout=10)
    assert reply.status_code == 200, reply.text
    status: dict[str, Any] = reply.json()
    return status


def answer(
    server: ServerProcess, rows: list[dict[str, Any]]
) -> tuple[str, list[tuple[float, float]]]:
    """One strict call: the one version that answered, and every row's (ttft, tpot)."""
    reply = httpx.post(f"{server.url}/predict/bulk/strict", json={"requests": rows}, timeout=10)
    assert reply.status_code == 200, reply.text
    predictions = reply.json()["predictions"]
    versions = {p["model_version"] for p in predictions}
    assert len(versions) == 1
    return versions.pop(), [(p["ttft_ms"], p["tpot_ms"]) for p in predictions]


def metric(url: str, series: str) -> float | None:
    """The value of one Prometheus sample of GET /metrics, `series` as printed (with its
    labels, if any); None when the series is absent."""
    reply = httpx.get(f"{url}/metrics", timeout=10)
    assert reply.status_code == 200, reply.text[:500]
    for line in reply.text.splitlines():
        name, _, value = line.rpartition(" ")
        if name == series:
            return float(value)
    return None


def present_metric(url: str, series: str) -> float:
    """metric() of a series the server must already print: absent fails the test."""
    value = metric(url, series)
    assert value is not None, f"{series} absent from {url}/metrics"
    return value


def first_bundle(trainer: ServerProcess, rows: int = 300, seed: int = 1) -> str:
    """Ingest enough rows for trees and wait until the first retrain is published and
    recorded (its retrains row written: the retrain is over)."""
    assert ingest(trainer.url, marked_rows(0, rows, seed)).status_code == 202

    def recorded() -> str | None:
        status = data_status(trainer.url)
        last = status["last_retrain_detail"] or {}
        version = status["model_version"]
        return version if version and last.get("version") == version else None

    return eventually(recorded, 20, "the first retrain publishes a bundle and records itself")
