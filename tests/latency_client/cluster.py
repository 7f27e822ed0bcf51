"""Real servers for the client's tests: a training server and prediction servers sharing one
model directory and a SQLite store in tmp_path, started as processes on 127.0.0.1."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from devkit.processes import ServerProcess, free_port


def cluster_env(tmp_path: Path) -> dict[str, str]:
    return {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "1",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_N_ESTIMATORS": "10",
        "LATENCY_TRAIN_THREADS": "1",
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "1",  # one process per server: SIGKILL/SIGSTOP reach all of it
        # Retention off in effect: the tests count every row.
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": "10000000",
        "LATENCY_MAX_TEST_DATA_SIZE": "10000000",
    }


@dataclass
class Cluster:
    trainer: ServerProcess
    predictors: list[ServerProcess]

    @property
    def prediction_urls(self) -> list[str]:
        return [p.url for p in self.predictors]

    def stop(self) -> None:
        for server in (self.trainer, *self.predictors):
            if server.proc is not None and server.proc.poll() is None:
                os.kill(server.proc.pid, signal.SIGCONT)  # a frozen one must hear SIGTERM
            server.stop()


def new_cluster(
    tmp_path: Path, predictors: int = 2, start_trainer: bool = True, **extra_env: str
) -> Cluster:
    env = {**cluster_env(tmp_path), **extra_env}
    cluster = Cluster(
        ServerProcess("training_server", free_port(), env, tmp_path / "training.log"),
        [
            ServerProcess("prediction_server", free_port(), env, tmp_path / f"prediction-{i}.log")
            for i in range(predictors)
        ],
    )
    try:
        if start_trainer:
            cluster.trainer.start()
        for server in cluster.predictors:
            server.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextmanager
def running_cluster(
    tmp_path: Path, predictors: int = 2, start_trainer: bool = True, **extra_env: str
) -> Iterator[Cluster]:
    cluster = new_cluster(tmp_path, predictors, start_trainer, **extra_env)
    try:
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def frozen(*servers: ServerProcess) -> Iterator[None]:
    """SIGSTOP: the process holds its sockets but answers nothing, as a hung server."""
    pids = [s.proc.pid for s in servers if s.proc is not None]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def strict_call(url: str, rows: list[dict[str, Any]]) -> list[tuple[float, float, str]]:
    reply = httpx.post(f"{url}/predict/bulk/strict", json={"requests": rows}, timeout=30)
    assert reply.status_code == 200, reply.text
    return [(p["ttft_ms"], p["tpot_ms"], p["model_version"]) for p in reply.json()["predictions"]]


def stored_rows(url: str) -> int:
    """Every row in the store: training plus held-out test rows."""
    status = httpx.get(f"{url}/data/status", timeout=30).json()
    return int(status["training_data"]["total_samples"] + status["test_data"]["total_samples"])


def row(i: int, **overrides: Any) -> dict[str, Any]:
    """A prediction row that differs from row j != i (input length), so answers are unique."""
    base: dict[str, Any] = {
        "kv_cache_percentage": 0.3,
        "input_token_length": 100 + i,
        "num_request_waiting": 0,
        "num_request_running": 2,
        "num_tokens_generated": 1,
        "prefix_cache_score": 0.0,
        "pod_type": "",
        "prefill_tokens_in_flight": 0,
        "decode_tokens_in_flight": 0,
    }
    base.update(overrides)
    return base


def training_row(i: int) -> dict[str, Any]:
    """A valid training entry measuring TTFT (marker i in decode_tokens_in_flight)."""
    return {
        **row(i % 5000, decode_tokens_in_flight=i),
        "num_tokens_generated": 0,
        "actual_ttft_ms": 100.0 + i % 997,
        "actual_tpot_ms": 0.0,
        "predicted_ttft_ms": 120.0,
        "predicted_tpot_ms": 12.0,
    }
