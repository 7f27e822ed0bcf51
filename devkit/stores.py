"""A store filled the way production fills it: a real training server on the store's URL,
the rows posted through /add_training_data_bulk, then the server stopped by PID."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from devkit.processes import ServerProcess, free_port

ROWS_PER_CALL = 1000


def fill_through_trainer(
    url: str, rows: Sequence[Mapping[str, Any]], folder: Path, *, timeout: float = 120.0
) -> None:
    """Start a trainer on `url` (no retrain while filling), post `rows` in 1,000-row calls,
    and stop it. A call the trainer does not accept (anything but 202) raises."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        "LATENCY_DB_URL": url,
        "LATENCY_MODEL_DIR": str(folder / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
        "LATENCY_EARLY_RETRAINS": "false",
    }
    server = ServerProcess("training_server", free_port(), env, folder / "trainer.log").start()
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            for start in range(0, len(rows), ROWS_PER_CALL):
                body = {"entries": list(rows[start : start + ROWS_PER_CALL])}
                answer = client.post(f"{server.url}/add_training_data_bulk", json=body)
                if answer.status_code != 202:
                    raise RuntimeError(
                        f"the trainer refused rows: {answer.status_code} {answer.text}"
                    )
    finally:
        server.stop()
