"""The image's default command (latency_cli.serve): SERVER_TYPE picks the server, the
environment its port, and --host/--port flags still win. Real processes on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from latency_cli.serve import ServerKind, UnknownServerType, server_kind
from tests.e2e.chart_pod import image_command, image_env

SERVE = [sys.executable, "-m", "latency_cli.serve"]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, ServerKind.TRAINING),
        ("", ServerKind.TRAINING),
        ("training", ServerKind.TRAINING),
        ("prediction-1", ServerKind.PREDICTION),
        ("prediction-12", ServerKind.PREDICTION),
        ("prediction", ServerKind.PREDICTION),
    ],
)
def test_server_type_names_the_server(value: str | None, kind: ServerKind) -> None:
    assert server_kind(value) is kind


@pytest.mark.parametrize("value", ["trainer", "predictions-1", "Training", "prediction-"])
def test_other_server_types_are_refused(value: str) -> None:
    with pytest.raises(UnknownServerType, match="names no server"):
        server_kind(value)


def test_an_unknown_server_type_exits_with_one_clear_line() -> None:
    done = subprocess.run(
        SERVE,
        env={"SERVER_TYPE": "trainer", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "latency-serve: SERVER_TYPE='trainer' names no server: use 'training' (or leave it "
        "unset) or 'prediction-<n>'"
    ]


def test_the_containerfile_runs_it_and_binds_every_interface() -> None:
    """The kubelet probes the pod IP: a server bound to 127.0.0.1 would never be ready."""
    assert image_command("python") == ["python", "-m", "latency_cli.serve"]
    env = image_env()
    assert (env["TRAINING_HOST"], env["PREDICT_HOST"]) == ("0.0.0.0", "0.0.0.0")


def test_unset_it_starts_the_training_server_and_flags_win(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "TRAINING_PORT": str(free_port()),  # the flag wins over it
    }
    command = [*SERVE, "--host", "127.0.0.1", "--port", str(port)]
    server = ServerProcess("serve", port, env, tmp_path / "t.log", command=command)
    try:
        server.start()
        assert httpx.get(f"{server.url}/data/status", timeout=10).status_code == 200
    finally:
        server.stop()


def test_a_prediction_type_starts_a_prediction_server_on_predict_port(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "SERVER_TYPE": "prediction-3",
        "PREDICT_PORT": str(port),
        "PREDICT_HOST": "127.0.0.1",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_WORKERS": "1",
    }
    server = ServerProcess("serve", port, env, tmp_path / "p.log", command=SERVE)
    try:
        server.start()
        status = httpx.get(f"{server.url}/status", timeout=10).json()
        assert status["model_version"] == "cold-start-prior"
        assert (status["model_source"], status["model_source_reason"]) == (
            "shared-dir",
            "no TRAINING_SERVER_URL",
        )
    finally:
        server.stop()
