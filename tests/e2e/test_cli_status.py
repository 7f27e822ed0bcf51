"""`latency-predictor status` against a real training server and real prediction servers on
127.0.0.1 (one SQLite file, one shared model directory), and with servers down.

The helpers here (cli, server_env, trained_cluster) serve the other test_cli_* modules too.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import synthetic_rows
from tests.polling import eventually

ROWS = 600

Cluster = tuple[ServerProcess, ServerProcess, str]  # the trainer, a predictor, the version


def cli(
    *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The console script as a subprocess, exactly as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "latency_cli", *args],
        check=False,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def server_env(folder: Path, model_dir: Path | None = None) -> dict[str, str]:
    return {
        "LATENCY_DB_URL": f"sqlite:///{folder / 'store.db'}",
        "LATENCY_MODEL_DIR": str(model_dir or folder / "models"),
        "LATENCY_N_ESTIMATORS": "10",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",  # the tests retrain with POST /retrain
        "LATENCY_EARLY_RETRAINS": "false",
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "1",  # one process: /status speaks for the whole server
    }


def started(module: str, env: dict[str, str], log: Path) -> ServerProcess:
    return ServerProcess(module, free_port(), env, log).start()


def train(trainer_url: str, rows: int = ROWS, seed: int = 1) -> str:
    """Ingest synthetic rows, retrain now; the new version."""
    reply = httpx.post(
        f"{trainer_url}/add_training_data_bulk",
        json={"entries": synthetic_rows(rows, seed=seed)},
        timeout=30,
    )
    assert reply.status_code == 202, reply.text
    assert httpx.post(f"{trainer_url}/retrain", timeout=60).json()["outcome"] == "ok"
    version: str = httpx.get(f"{trainer_url}/data/status", timeout=10).json()["model_version"]
    return version


def wait_until_served(predictor_url: str, version: str, timeout: float = 30.0) -> None:
    eventually(
        lambda: httpx.get(f"{predictor_url}/status", timeout=5).json()["model_version"] == version,
        timeout,
        f"{predictor_url} serving {version}",
    )


@contextlib.contextmanager
def trained_cluster(folder: Path) -> Iterator[Cluster]:
    """A training and a prediction server sharing a model directory, both on a trained
    version; stopped (only these two processes) on exit."""
    env = server_env(folder)
    servers: list[ServerProcess] = []
    try:
        servers.append(started("training_server", env, folder / "training.log"))
        servers.append(started("prediction_server", env, folder / "prediction.log"))
        trainer, predictor = servers
        version = train(trainer.url)
        wait_until_served(predictor.url, version)
        yield trainer, predictor, version
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cluster]:
    with trained_cluster(tmp_path_factory.mktemp("status")) as servers:
        yield servers


def table_row(stdout: str, url: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if f" {url} " in line)


def detail_line(stdout: str, label: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(label))


def test_status_table_with_both_servers_up(cluster: Cluster) -> None:
    trainer, predictor, version = cluster
    done = cli("status", "--training-url", trainer.url, "--prediction-url", predictor.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].split()[:4] == ["server", "url", "state", "health"]
    assert table_row(done.stdout, trainer.url)[:5] == ["training", trainer.url, "up", "ok", version]
    served = table_row(done.stdout, predictor.url)
    assert served[:5] == ["prediction", predictor.url, "up", "ok", version]
    assert served[-1] == "current"
    data = httpx.get(f"{trainer.url}/data/status").json()
    train_, test = data["training_data"], data["test_data"]
    assert detail_line(done.stdout, "samples").split(None, 1)[1] == (
        f"ttft {train_['ttft_samples']} train + {test['ttft_samples']} test, "
        f"tpot {train_['tpot_samples']} train + {test['tpot_samples']} test"
    )
    assert ", ok, " in detail_line(done.stdout, "last retrain")
    assert detail_line(done.stdout, "failed retrains").endswith("0 in a row, 0 since start")
    assert detail_line(done.stdout, "leadership").split()[1] == "leader"


def test_status_json_with_both_servers_up(cluster: Cluster) -> None:
    trainer, predictor, version = cluster
    done = cli("status", "--training-url", trainer.url, "--prediction-url", predictor.url, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["all_up"] is True
    training, (served,) = report["training"], report["prediction"]
    assert training["state"] == served["state"] == "up"
    assert training["health"] == served["health"] == "ok"
    assert training["model_version"] == served["model_version"] == version
    assert served["lags_trainer"] is False and served["cold_start"] is False
    assert 0 <= served["model_age_seconds"] < 600 and 0 <= training["model_age_seconds"] < 600
    data = httpx.get(f"{trainer.url}/data/status").json()
    for split, key in (("train", "training_data"), ("test", "test_data")):
        for target in ("ttft", "tpot"):
            assert training["samples"][split][target] == data[key][f"{target}_samples"]
    assert sum(n for split in training["samples"].values() for n in split.values()) == ROWS
    last = training["last_retrain"]
    assert last["status"] == "ok" and last["version"] == version and last["duration_s"] > 0
    assert training["retrain_failures"]["consecutive"] == 0
    assert training["leader"] is True


def test_status_names_a_prediction_server_that_is_down(cluster: Cluster) -> None:
    trainer, predictor, version = cluster
    down = f"http://127.0.0.1:{free_port()}"
    args = (
        "status",
        "--training-url",
        trainer.url,
        "--prediction-url",
        predictor.url,
        "--prediction-url",
        down,
    )
    done = cli(*args)
    assert done.returncode == 1
    assert table_row(done.stdout, down)[:3] == ["prediction", down, "down"]
    assert table_row(done.stdout, predictor.url)[4] == version  # what it could read
    assert (
        f"cannot reach the prediction server at {down}: connection refused"
        in done.stdout.splitlines()
    )
    assert "Traceback" not in done.stdout + done.stderr

    report = json.loads(cli(*args, "--json").stdout)
    assert report["all_up"] is False
    assert [p["state"] for p in report["prediction"]] == ["up", "down"]
    assert report["prediction"][0]["lags_trainer"] is False
    assert report["prediction"][1]["lags_trainer"] is None
    assert "connection refused" in report["prediction"][1]["error"]


def test_status_shows_a_prediction_server_that_lags(cluster: Cluster, tmp_path: Path) -> None:
    """A replica on another (empty) model directory serves the prior: it lags the trainer."""
    trainer, predictor, _ = cluster
    behind = started("prediction_server", server_env(tmp_path), tmp_path / "behind.log")
    try:
        done = cli(
            "status",
            "--training-url",
            trainer.url,
            "--prediction-url",
            predictor.url,
            "--prediction-url",
            behind.url,
            "--json",
        )
        text = cli("status", "--training-url", trainer.url, "--prediction-url", behind.url)
    finally:
        behind.stop()
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    lags = {p["url"]: p["lags_trainer"] for p in report["prediction"]}
    assert lags == {predictor.url: False, behind.url: True}
    row = table_row(text.stdout, behind.url)
    assert row[4] == "cold-start-prior" and row[-1] == "LAGS"


def test_status_with_no_server_running() -> None:
    trainer, predictor = (f"http://127.0.0.1:{free_port()}" for _ in range(2))
    done = cli("status", "--training-url", trainer, "--prediction-url", predictor)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert f"cannot reach the training server at {trainer}: connection refused" in lines
    assert f"cannot reach the prediction server at {predictor}: connection refused" in lines
    assert done.stderr == ""
    report = json.loads(
        cli("status", "--training-url", trainer, "--prediction-url", predictor, "--json").stdout
    )
    assert report["training"]["state"] == "down" and report["all_up"] is False


def test_status_usage_errors_exit_2() -> None:
    bad_url = cli("status", "--training-url", "127.0.0.1:8000")
    assert bad_url.returncode == 2 and "not an http:// or https:// URL" in bad_url.stderr
    assert cli("status", "--no-such-flag").returncode == 2
