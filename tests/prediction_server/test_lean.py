"""A prediction server process never maps scikit-learn, even where it is installed (the dev
extra installs it for the trainer's legacy files)."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import httpx

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row, publish_trained_bundle


def mapped_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_a_serving_prediction_server_loads_no_scikit_learn(tmp_path: Path) -> None:
    assert find_spec("sklearn") is not None, "the dev extra installs it: the test needs it"
    manifest = publish_trained_bundle(tmp_path / "models")
    server = ServerProcess(
        "prediction_server",
        free_port(),
        {
            "LATENCY_MODEL_DIR": str(tmp_path / "models"),
            "LATENCY_WORKERS": "1",
        },
        tmp_path / "prediction.log",
    )
    try:
        server.start()
        reply = httpx.post(
            f"{server.url}/predict/bulk/strict", json={"requests": [prediction_row()]}, timeout=10
        )
        assert reply.json()["model_version"] == manifest.version  # a trained model served
        maps = mapped_libraries(server.pid)
        assert "xgboost" in maps  # the library that loads the model is there...
        assert "/sklearn/" not in maps  # ...the one for its scikit-learn wrappers is not
    finally:
        server.stop()
