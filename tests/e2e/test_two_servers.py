"""End to end with real processes on 127.0.0.1: one training server, two prediction servers
sharing a model directory, bulk ingestion, hot swap, and a SIGKILL of the trainer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row, synthetic_rows
from tests.polling import eventually

BATCH = 200
SHORT = prediction_row(input_token_length=50)
LONG = prediction_row(input_token_length=6000, num_request_waiting=2)

Cluster = tuple[ServerProcess, list[ServerProcess]]  # the trainer, the two predictors


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    env = {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "1",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_N_ESTIMATORS": "30",
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "1",  # one process each, so /status speaks for the whole server
        # Retention off in effect: the SIGKILL test counts every accepted row.
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": "10000000",
        "LATENCY_MAX_TEST_DATA_SIZE": "10000000",
    }
    trainer = ServerProcess("training_server", free_port(), env, tmp_path / "training.log")
    predictors = [
        ServerProcess("prediction_server", free_port(), env, tmp_path / f"prediction-{i}.log")
        for i in range(2)
    ]
    try:
        trainer.start()
        for p in predictors:
            p.start()
        yield trainer, predictors
    finally:
        for server in (trainer, *predictors):
            server.stop()


def ingest(url: str, rows: list[dict[str, Any]]) -> int:
    accepted = 0
    for i in range(0, len(rows), BATCH):
        reply = httpx.post(
            f"{url}/add_training_data_bulk", json={"entries": rows[i : i + BATCH]}, timeout=30
        )
        assert reply.status_code == 202, reply.text
        accepted += int(reply.json()["message"].split()[1])
    return accepted


def wait_for_new_version(
    trainer: ServerProcess,
    predictors: list[ServerProcess],
    old: str | None,
    stored: int,
    timeout: float = 60.0,
) -> str:
    """Wait until the trainer publishes a version other than `old`, trained on all `stored`
    rows, and both predictors serve it.

    Early retrains fire while a bulk ingest is still arriving, so a version fitted on part of
    the rows is followed by another one: only the one that saw every row is the last.
    """

    def served_by_both() -> str | None:
        status = httpx.get(f"{trainer.url}/data/status").json()
        version: str | None = status["model_version"]
        detail = status["last_retrain_detail"] or {}
        seen = detail.get("max_sample_id") or 0  # ids run 1..n in the fresh store
        served = {httpx.get(f"{p.url}/status").json()["model_version"] for p in predictors}
        if version not in (None, old) and seen >= stored and served == {version}:
            return version
        return None

    return eventually(
        served_by_both, timeout, f"a version trained on {stored} rows served by both predictors"
    )


def strict(server: ServerProcess, rows: list[dict[str, Any]]) -> dict[str, Any]:
    reply = httpx.post(f"{server.url}/predict/bulk/strict", json={"requests": rows}, timeout=10)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def test_ingest_retrain_and_hot_swap_on_both_predictors(
    cluster: Cluster,
) -> None:
    trainer, predictors = cluster
    cold = strict(predictors[0], [SHORT])
    assert cold["model_version"] == "cold-start-prior"

    assert ingest(trainer.url, synthetic_rows(1000, seed=1)) == 1000
    first = wait_for_new_version(trainer, predictors, None, stored=1000)

    def same_answers() -> list[dict[str, Any]] | None:
        """Both predictors answer alike once each has read the trainer's newest live
        calibration too: the trainer rewrites it as scores arrive, and each predictor picks
        it up on its own sync tick, so for up to one interval their factors may differ."""
        answers = [strict(p, [SHORT, LONG]) for p in predictors]
        for answer in answers:
            assert answer["model_version"] == first
            short, long = answer["predictions"]
            assert long["ttft_ms"] > short["ttft_ms"]
        figures = [
            [(row["ttft_ms"], row["tpot_ms"]) for row in answer["predictions"]]
            for answer in answers
        ]
        return answers if figures[0] == figures[1] else None

    eventually(same_answers, 10, "the same answers from both predictors on one version")

    ingest(trainer.url, synthetic_rows(400, seed=2))
    second = wait_for_new_version(trainer, predictors, first, stored=1400)
    assert second > first
    assert all(strict(p, [SHORT])["model_version"] == second for p in predictors)


def test_sigkill_of_the_trainer_loses_no_accepted_sample(
    cluster: Cluster,
) -> None:
    trainer, predictors = cluster
    rows = synthetic_rows(BATCH, seed=3)
    accepted = 0
    stop = threading.Event()

    def stream() -> None:
        nonlocal accepted
        with httpx.Client(timeout=5) as client:
            for _ in range(500):  # bounded: 500 batches at most
                if stop.is_set():
                    return
                try:
                    reply = client.post(
                        f"{trainer.url}/add_training_data_bulk", json={"entries": rows}
                    )
                except httpx.HTTPError:
                    return  # the server died mid-call: that batch was never acknowledged
                if reply.status_code == 202:
                    accepted += BATCH

    streamer = threading.Thread(target=stream)
    streamer.start()
    # Killed mid-stream, once it has landed batches.
    eventually(lambda: accepted >= 2 * BATCH, 60, "two batches accepted, the stream going on")
    trainer.kill()
    stop.set()
    streamer.join(30)
    assert accepted >= 2 * BATCH, "the stream should have landed several batches before the kill"

    # The model that was published keeps being served while the trainer is down.
    assert strict(predictors[0], [SHORT])["total_requests"] == 1

    trainer.start()
    stored = httpx.get(f"{trainer.url}/data/status").json()
    total = stored["training_data"]["total_samples"] + stored["test_data"]["total_samples"]
    # Every 202 is in the store; at most the one unanswered batch may also have committed.
    assert accepted <= total <= accepted + BATCH
