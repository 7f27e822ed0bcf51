"""The CLI against a trainer that requires a token: admin commands fail with the server's
reason without it and succeed with the token from the environment, as the servers read it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import synthetic_rows

TOKEN = "cli-token"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LATENCY_API_TOKEN")}
    return subprocess.run(
        [sys.executable, "-m", "latency_cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def test_export_needs_the_token_from_the_environment(tmp_path: Path) -> None:
    trainer = ServerProcess(
        "training_server",
        free_port(),
        {
            "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
            "LATENCY_MODEL_DIR": str(tmp_path / "models"),
            "LATENCY_API_TOKEN": TOKEN,
            "LATENCY_N_ESTIMATORS": "10",
            "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
            "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
            "LATENCY_EARLY_RETRAINS": "false",
        },
        tmp_path / "t.log",
    ).start()
    try:
        httpx.post(
            f"{trainer.url}/add_training_data_bulk",
            timeout=30,
            json={"entries": synthetic_rows(300, seed=1)},
        ).raise_for_status()
        httpx.post(
            f"{trainer.url}/retrain", timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}
        ).raise_for_status()
        archive = tmp_path / "bundle.tar.gz"
        refused = cli("export", "--url", trainer.url, "-o", str(archive))
        assert refused.returncode == 1 and "API token" in refused.stderr
        assert not archive.exists()
        secret = tmp_path / "token"
        secret.write_text(TOKEN)
        done = cli(
            "export", "--url", trainer.url, "-o", str(archive), LATENCY_API_TOKEN_FILE=str(secret)
        )
        assert done.returncode == 0, done.stderr
        assert archive.stat().st_size > 0
        again = cli("import", str(archive), "--url", trainer.url, LATENCY_API_TOKEN=TOKEN)
        assert again.returncode == 0, again.stderr
    finally:
        trainer.stop()
