"""Settings: LATENCY_<FIELD> for ours, the llm-d names as aliases, self-validating TLS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from shared.settings import ModelType, PredictionSettings, TrainingSettings, env_names


def test_every_setting_is_read_from_its_prefixed_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LATENCY_DB_URL", "sqlite:////tmp/x.db")
    monkeypatch.setenv("LATENCY_MODEL_TYPE", "lightgbm")
    monkeypatch.setenv("LATENCY_MAX_TRAINING_WINDOW", "1234")
    monkeypatch.setenv("LATENCY_TTFT_MIN_ROWS_PER_LEAF", "7")
    settings = TrainingSettings()
    assert settings.db_url == "sqlite:////tmp/x.db"
    assert settings.model_type is ModelType.LIGHTGBM
    assert (settings.max_training_window, settings.ttft_min_rows_per_leaf) == (1234, 7)


def test_llm_d_names_are_honoured_and_not_prefixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINING_SERVER_URL", "http://localhost:8000")
    monkeypatch.setenv("MODEL_SYNC_INTERVAL_SEC", "30")
    monkeypatch.setenv("PREDICT_PORT", "8003")
    monkeypatch.setenv("LATENCY_PORT", "9999")  # not a name of ours: ignored
    settings = PredictionSettings()
    assert settings.training_server_url == "http://localhost:8000"
    assert (settings.model_sync_interval_sec, settings.port) == (30.0, 8003)


def test_constructor_takes_field_names() -> None:
    assert PredictionSettings(port=1, model_sync_interval_sec=2).port == 1


@pytest.mark.parametrize("half", ["tls_cert_file", "tls_key_file"])
def test_half_a_tls_pair_is_refused(half: str, tmp_path: Path) -> None:
    half_pair: dict[str, Any] = {half: tmp_path / "x.pem"}
    with pytest.raises(ValidationError, match="both LATENCY_TLS_CERT_FILE and"):
        TrainingSettings(**half_pair)
    pair = TrainingSettings(tls_cert_file=tmp_path / "c.pem", tls_key_file=tmp_path / "k.pem")
    assert pair.tls_cert_file is not None


def test_a_server_with_half_a_tls_pair_exits_with_one_clear_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "prediction_server", "--port", "1"],
        env={"LATENCY_TLS_CERT_FILE": str(tmp_path / "c.pem"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "invalid settings" in done.stderr and "LATENCY_TLS_KEY_FILE" in done.stderr
    assert "Traceback" not in done.stderr


def test_env_names_lists_what_each_server_reads() -> None:
    names = env_names(PredictionSettings)
    assert {
        "LATENCY_MODEL_DIR",
        "LATENCY_WORKERS",
        "TRAINING_SERVER_URL",
        "PREDICT_PORT",
        "MODEL_SYNC_INTERVAL_SEC",
    } <= names
    assert "LATENCY_DB_URL" not in names and "LATENCY_PORT" not in names
    assert "LATENCY_DB_URL" in env_names(TrainingSettings)
