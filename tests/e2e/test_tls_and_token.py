"""Real processes: a training server that requires a token and serves TLS, and a prediction
server that mirrors its bundles over that HTTPS with the token (LATENCY_SYNC_FROM_TRAINER)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import synthetic_rows
from tests.polling import eventually

TOKEN = "e2e-token"


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_token_and_tls_end_to_end(tmp_path: Path) -> None:
    if not Path("/usr/bin/openssl").exists():
        pytest.fail("openssl is needed to make the test certificate (Debian: openssl)")
    cert, key = self_signed(tmp_path)
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    common = {"LATENCY_API_TOKEN_FILE": str(secret), "LATENCY_N_ESTIMATORS": "10"}
    trainer = ServerProcess(
        "training_server",
        free_port(),
        {
            **common,
            "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
            "LATENCY_MODEL_DIR": str(tmp_path / "trainer-models"),
            "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
            "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
            "LATENCY_EARLY_RETRAINS": "false",
            "LATENCY_TLS_CERT_FILE": str(cert),
            "LATENCY_TLS_KEY_FILE": str(key),
        },
        tmp_path / "trainer.log",
        tls_ca=cert,
    )
    predictor = ServerProcess(
        "prediction_server",
        free_port(),
        {
            **common,
            "LATENCY_MODEL_DIR": str(tmp_path / "predictor-models"),
            "LATENCY_SYNC_FROM_TRAINER": "1",
            "TRAINING_SERVER_URL": trainer.url,
            "MODEL_SYNC_INTERVAL_SEC": "0.5",
            "SSL_CERT_FILE": str(cert),  # trust our CA
        },
        tmp_path / "predictor.log",
    )
    trainer.start()
    try:
        with httpx.Client(base_url=trainer.url, verify=trainer.verify, timeout=30) as https:
            with pytest.raises(httpx.HTTPError):  # plain http to the TLS port
                httpx.get(trainer.url.replace("https://", "http://") + "/readyz", timeout=5)
            rows = synthetic_rows(300, seed=4)
            assert (
                https.post("/add_training_data_bulk", json={"entries": rows}).status_code == 202
            )  # an EPP route: open
            assert https.post("/retrain").status_code == 401
            auth = {"Authorization": f"Bearer {TOKEN}"}
            assert https.post("/retrain", headers=auth).json()["outcome"] == "ok"
            version = https.get("/model/download/info").json()["model_version"]
            assert https.get("/model/export").status_code == 401
        predictor.start()
        eventually(
            lambda: (
                httpx.get(f"{predictor.url}/status", timeout=5).json()["model_version"] == version
            ),
            30,
            f"the predictor serving {version}",
            detail=lambda: predictor.log_path.read_text()[-2000:],
        )
    finally:
        predictor.stop()
        trainer.stop()
