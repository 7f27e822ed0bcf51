"""The README's first command runs `latency-predictor demo`: it must retrain and stop cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from devkit.processes import free_port


def test_demo_serves_a_retrained_model_and_stops_its_servers(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "latency_cli",
            "demo",
            "--duration",
            "8",
            "--var",
            str(tmp_path / "var"),
            "--training-port",
            str(free_port()),
            "--prediction-port",
            str(free_port()),
        ],
        env={**os.environ, "LATENCY_RETRAINING_INTERVAL_SEC": "2"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any("cold-start-prior" in line for line in lines)
    retrains = [line for line in lines if "retrain " in line and "coverage" in line]
    assert retrains, done.stdout
    assert lines[-1].startswith("stopped both servers")
    assert (tmp_path / "var" / "latency.db").is_file()
    assert (tmp_path / "var" / "models" / "CURRENT").is_file()
