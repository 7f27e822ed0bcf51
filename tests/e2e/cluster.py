"""One trainer and two prediction servers as real processes on 127.0.0.1: one reads the
trainer's model directory, the other mirrors its bundles over HTTP (llm-d's chart layout).
Retrains every second, so a test sees a trained version within seconds of its rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx

from devkit.processes import ServerProcess, free_port

Cluster = tuple[ServerProcess, list[ServerProcess]]


def running_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """(trainer, [directory reader, mirror]), all started; stopped after."""
    base = {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "1",
        "LATENCY_N_ESTIMATORS": "30",
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "1",
    }
    trainer = ServerProcess("training_server", free_port(), base, tmp_path / "training.log")
    reader = ServerProcess("prediction_server", free_port(), base, tmp_path / "p-shared.log")
    mirror_env = {
        **base,
        "LATENCY_MODEL_DIR": str(tmp_path / "mirror-models"),
        "TRAINING_SERVER_URL": trainer.url,
        "LATENCY_SYNC_FROM_TRAINER": "true",
    }
    mirror = ServerProcess("prediction_server", free_port(), mirror_env, tmp_path / "p-mirror.log")
    started: list[ServerProcess] = []
    try:
        for server in (trainer, reader, mirror):
            started.append(server.start())
        yield trainer, [reader, mirror]
    finally:
        for server in started:
            server.stop()


def served_everywhere(training_url: str, prediction_urls: list[str], stored: int) -> str | None:
    """The pool's version once its retrain saw `stored` rows and every prediction server
    serves it (None until then); the URLs are the pool's base URLs."""
    status = httpx.get(f"{training_url}/data/status").json()
    version: str | None = status["model_version"]
    detail = status["last_retrain_detail"] or {}
    # /data/status reads the served bundle, then the last retrain: a retrain that published
    # in between shows its rows next to the bundle before it. Count rows of this one only.
    seen = (detail.get("max_sample_id") or 0) if detail.get("version") == version else 0
    served = {httpx.get(f"{url}/status").json()["model_version"] for url in prediction_urls}
    return version if version and seen >= stored and served == {version} else None
