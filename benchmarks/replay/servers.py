"""The servers the HTTP modes replay against: their environment, and a fresh pair of them
(or the caller's own, on 127.0.0.1 only)."""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

from benchmarks.common import note
from devkit.processes import ServerProcess, free_port

LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LARGE = "1000000"  # retention caps: every replayed row stays trainable


def server_env(workdir: Path, args: argparse.Namespace) -> dict[str, str]:
    """The servers' environment: production settings except the interval under test, a
    fresh store and model directory, retention caps that keep every row, one worker."""
    env = {
        "LATENCY_DB_URL": f"sqlite:///{workdir / 'replay.db'}",
        "LATENCY_MODEL_DIR": str(workdir / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": str(args.retrain_interval),
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "1",
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": LARGE,
        "LATENCY_MAX_TEST_DATA_SIZE": LARGE,
        "LATENCY_MAX_TRAINING_WINDOW": LARGE,
    }
    for flag, name in (
        ("model_type", "LATENCY_MODEL_TYPE"),
        ("objective", "LATENCY_OBJECTIVE_TYPE"),
        ("calibration", "LATENCY_CALIBRATION"),
    ):
        if getattr(args, flag):
            env[name] = getattr(args, flag)
    # The EPP sends its rows once a second and the leader scores them as often: one batch.
    env["LATENCY_CALIBRATION_INTERVAL_SEC"] = str(args.batch_seconds / args.speedup)
    return env


def check_local(url: str) -> str:
    host = urlparse(url).hostname
    if host not in LOCAL_HOSTS:
        raise SystemExit(f"{url}: replay talks only to 127.0.0.1")
    return url.rstrip("/")


class ServerPair:
    """A fresh training server and one prediction server on one temporary store and model
    directory, started together and ended by PID."""

    def __init__(self, workdir: Path, env: dict[str, str]):
        self.trainer = ServerProcess("training_server", free_port(), env, workdir / "training.log")
        self.predictor = ServerProcess(
            "prediction_server", free_port(), env, workdir / "prediction.log"
        )

    def __enter__(self) -> ServerPair:
        servers = (self.trainer, self.predictor)
        with ThreadPoolExecutor(max_workers=2) as pool:
            started = [pool.submit(s.start) for s in servers]
            errors = [f.exception() for f in started]
        failed = next((e for e in errors if e is not None), None)
        if failed is not None:
            self.__exit__(None, None, None)
            raise failed
        return self

    def log_tails(self) -> None:
        for server in (self.trainer, self.predictor):
            if server.log_path.is_file():
                note(
                    f"--- {server.module} log tail ---\n"
                    f"{server.log_path.read_text(errors='replace')[-3000:]}"
                )

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is not None:
            self.log_tails()
        for server in (self.predictor, self.trainer):
            server.stop()
