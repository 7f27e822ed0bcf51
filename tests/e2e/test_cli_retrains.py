"""`latency-predictor retrains` against a real training server, and with none running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import synthetic_rows


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "latency_cli", "retrains", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def test_retrains_table_and_json(tmp_path: Path) -> None:
    env = {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_N_ESTIMATORS": "10",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
        "LATENCY_EARLY_RETRAINS": "false",
    }  # the test retrains with POST /retrain
    server = ServerProcess("training_server", free_port(), env, tmp_path / "t.log").start()
    try:
        for seed in (1, 2):
            rows = synthetic_rows(300, seed=seed)
            for row in rows if seed == 2 else ():  # served p90s 2x the actual: coverage 1.0
                row.update(
                    predicted_ttft_ms=2 * row["actual_ttft_ms"],
                    predicted_tpot_ms=2 * row["actual_tpot_ms"],
                )
            httpx.post(f"{server.url}/add_training_data_bulk", json={"entries": rows}, timeout=30)
            assert httpx.post(f"{server.url}/retrain", timeout=60).json()["outcome"] == "ok"
        table = cli("--url", server.url, "-n", "5")
        assert table.returncode == 0, table.stderr
        lines = table.stdout.strip().splitlines()
        assert "ttft cov" in lines[0] and "tpot live cov" in lines[0] and len(lines) == 3
        assert all(" ok " in line for line in lines[1:])
        # newest first: the second retrain scored the served p90s sent back since the first
        assert lines[1].split()[-2] == "1.000" and lines[2].split()[-2] == "-"
        # the last column: the model the TPOT target served
        assert lines[0].split()[-2:] == ["tpot", "model"]
        assert all(line.split()[-1].startswith(("trees_", "p90")) for line in lines[1:])
        as_json = json.loads(cli("--url", server.url, "--json").stdout)
        assert [r["status"] for r in as_json] == ["ok", "ok"]
        assert as_json[0]["started_at"] > as_json[1]["started_at"]
    finally:
        server.stop()


def test_clear_error_when_the_server_is_down() -> None:
    done = cli("--url", f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 1
    assert "cannot read retrains from" in done.stdout
