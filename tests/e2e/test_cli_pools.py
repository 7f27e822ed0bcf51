"""`latency-predictor pools` and the `--pool NAME` option of status, retrains, predict, export
and import, against a real training server and a real prediction server on 127.0.0.1 that
share one SQLite file and one model directory, with two pools trained apart: `default`
(600 rows) and `h200-llama` (300 other rows).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row
from tests.e2e.test_cli_status import cli, server_env, started, table_row, train, wait_until_served

POOL = "h200-llama"
DEFAULT_ROWS, POOL_ROWS = 600, 300


class Pools(NamedTuple):
    trainer: ServerProcess
    predictor: ServerProcess
    versions: dict[str, str]  # pool -> its published model version
    folder: Path


def prefixed(url: str, pool: str) -> str:
    return url if pool == "default" else f"{url}/pools/{pool}"


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pools]:
    folder = tmp_path_factory.mktemp("pools")
    env = server_env(folder)
    servers: list[ServerProcess] = []
    try:
        servers.append(started("training_server", env, folder / "training.log"))
        servers.append(started("prediction_server", env, folder / "prediction.log"))
        trainer, predictor = servers
        versions = {
            "default": train(trainer.url, DEFAULT_ROWS, seed=1),
            POOL: train(prefixed(trainer.url, POOL), POOL_ROWS, seed=2),
        }
        assert versions["default"] != versions[POOL]
        for pool, version in versions.items():  # the predictor finds the new pool's directory
            wait_until_served(prefixed(predictor.url, pool), version)
        yield Pools(trainer, predictor, versions, folder)
    finally:
        for server in servers:
            server.stop()


def pool_args(pool: str) -> tuple[str, ...]:
    return () if pool == "default" else ("--pool", pool)


@pytest.mark.parametrize("pool", ["default", POOL])
def test_status_reads_the_pool_asked_for(pools: Pools, pool: str) -> None:
    trainer, predictor, versions, _ = pools
    urls = ("--training-url", trainer.url, "--prediction-url", predictor.url)
    done = cli("status", *urls, *pool_args(pool), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    training, (served,) = report["training"], report["prediction"]
    assert report["pool"] == pool
    assert training["url"] == prefixed(trainer.url, pool)
    assert training["model_version"] == served["model_version"] == versions[pool]
    assert served["lags_trainer"] is False
    counted = sum(n for split in training["samples"].values() for n in split.values())
    assert counted == {"default": DEFAULT_ROWS, POOL: POOL_ROWS}[pool]
    assert training["last_retrain"]["version"] == versions[pool]

    text = cli("status", *urls, *pool_args(pool))
    assert text.returncode == 0, text.stdout + text.stderr
    row = table_row(text.stdout, prefixed(trainer.url, pool))
    assert row[:5] == ["training", prefixed(trainer.url, pool), "up", "ok", versions[pool]]
    assert table_row(text.stdout, prefixed(predictor.url, pool))[4] == versions[pool]


@pytest.mark.parametrize("pool", ["default", POOL])
def test_retrains_and_predict_per_pool(pools: Pools, pool: str) -> None:
    trainer, predictor, versions, _ = pools
    retrains = cli("retrains", "--url", trainer.url, *pool_args(pool), "--json")
    assert retrains.returncode == 0, retrains.stdout + retrains.stderr
    assert [(r["status"], r["version"]) for r in json.loads(retrains.stdout)] == [
        ("ok", versions[pool])
    ]
    row = json.dumps(prediction_row())
    predicted = cli(
        "predict", "--url", predictor.url, *pool_args(pool), "--file", "-", "--json", stdin=row
    )
    assert predicted.returncode == 0, predicted.stdout + predicted.stderr
    assert json.loads(predicted.stdout)["model_version"] == versions[pool]


def test_export_and_import_a_pools_bundle(pools: Pools, tmp_path: Path) -> None:
    trainer, _, versions, _ = pools
    archive = tmp_path / "pool.tar.gz"
    exported = cli("export", "--url", trainer.url, "--pool", POOL, "-o", str(archive))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith(f"exported model {versions[POOL]} to {archive}")
    model_dir = tmp_path / "models"
    imported = cli("import", str(archive), "--model-dir", str(model_dir), "--pool", POOL)
    assert imported.returncode == 0, imported.stderr
    assert f"into {model_dir / 'pools' / POOL}:" in imported.stdout
    assert (model_dir / "pools" / POOL / "versions" / versions[POOL]).is_dir()
    assert not (model_dir / "versions").exists()  # not the default pool's place


def test_pools_lists_both_pools(pools: Pools) -> None:
    trainer, _, versions, _ = pools
    listing = httpx.get(f"{trainer.url}/pools", timeout=10).json()
    samples = {p["name"]: p["training_samples"] for p in listing["pools"]}
    assert set(samples) == {"default", POOL}
    assert samples["default"] > samples[POOL] > 0  # the train split of 600 and of 300 rows

    done = cli("pools", "--training-url", trainer.url)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    header = "pool model version training samples last retrain (UTC) failures owner"
    assert " ".join(lines[0].split()) == header
    rows = {line.split()[0]: line.split() for line in lines[1:3]}
    owners = {p["name"]: p["owner"] for p in listing["pools"]}
    for pool in ("default", POOL):
        name, version, count, day, _clock, failures, owner = rows[pool]
        assert (name, version, count, failures) == (pool, versions[pool], str(samples[pool]), "0")
        assert day[:2] == "20"  # a date: the retrain the fixture ran
        assert owner == owners[pool] and ":" in owner  # the replica that retrained it, host:pid
    assert lines[-1] == f"2 pools of at most {listing['max_pools']}"
    as_json = json.loads(cli("pools", "--url", trainer.url, "--json").stdout)
    assert as_json == httpx.get(f"{trainer.url}/pools", timeout=10).json()


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("retrains",),
        ("predict", "--input-token-length", "5"),
        ("export",),
        ("import", "archive.tar.gz"),
    ],
)
@pytest.mark.parametrize("name", ["H200_Llama", "-h200", "h200-", "a" * 64, "", "a/b"])
def test_an_invalid_pool_name_is_a_usage_error(command: tuple[str, ...], name: str) -> None:
    # `--pool=NAME`: argparse reads a separate "-h200" as an option, not a value
    done = cli(*command, f"--pool={name}")  # refused before any request: no server needed
    assert done.returncode == 2, done.stdout + done.stderr
    assert "argument --pool: pool name" in done.stderr
    assert "is invalid: 1-63 lower-case letters, digits or '-'" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_pools_with_the_server_down() -> None:
    down = f"http://127.0.0.1:{free_port()}"
    done = cli("pools", "--training-url", down)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"latency-predictor pools: cannot reach the training server at {down}: connection refused"
    )
    assert done.stdout == ""
