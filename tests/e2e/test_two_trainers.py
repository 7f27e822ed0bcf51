"""End to end with two real training processes on one PostgreSQL schema and one model
directory: both ingest, only the leader retrains and publishes, a SIGKILL of the leader hands
the retrains to the other within a bounded time, and no accepted sample is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import synthetic_rows
from shared.artifact import read_current_version
from tests.polling import eventually

pytestmark = pytest.mark.postgres

BATCH = 200
TAKEOVER_BOUND_S = 15.0


@pytest.fixture
def trainers(tmp_path: Path, postgres_url: str) -> Iterator[list[ServerProcess]]:
    env = {
        "LATENCY_DB_URL": postgres_url,
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "1",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_N_ESTIMATORS": "20",
        # Retention off in effect: the test counts every accepted row.
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": "10000000",
        "LATENCY_MAX_TEST_DATA_SIZE": "10000000",
    }
    servers = [
        ServerProcess("training_server", free_port(), env, tmp_path / f"trainer-{i}.log")
        for i in range(2)
    ]
    try:
        for server in servers:  # one after the other: the first start-up runs the migrations
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()


def status(server: ServerProcess) -> dict[str, Any]:
    reply = httpx.get(f"{server.url}/data/status", timeout=5)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def ok_retrains(server: ServerProcess) -> list[dict[str, Any]]:
    rows = httpx.get(f"{server.url}/retrains", params={"limit": 1000}, timeout=5).json()
    return [r for r in rows["retrains"] if r["status"] == "ok"]


def ingest(server: ServerProcess, rows: list[dict[str, Any]]) -> int:
    accepted = 0
    for i in range(0, len(rows), BATCH):
        reply = httpx.post(
            f"{server.url}/add_training_data_bulk",
            json={"entries": rows[i : i + BATCH]},
            timeout=30,
        )
        assert reply.status_code == 202, reply.text
        accepted += len(rows[i : i + BATCH])
    return accepted


def next_version_followed(leader: ServerProcess, follower: ServerProcess, after: str) -> str:
    """The leader's next version after `after`, once the follower serves it (or a newer one):
    its status loads the newest published bundle; the follower holds rows it never trained
    on, and must not train on them."""
    version: str = eventually(
        lambda: (v := status(leader)["model_version"]) not in (None, after) and v,
        30,
        "the leader retraining on the follower's samples",
    )
    eventually(
        lambda: (status(follower)["model_version"] or "") >= version,
        30,
        f"the follower serving {version}",
    )
    return version


def test_one_leader_retrains_and_the_other_takes_over_after_sigkill(
    trainers: list[ServerProcess], tmp_path: Path
) -> None:
    model_dir = tmp_path / "models"
    eventually(
        lambda: sum(status(s)["trainer"]["is_leader"] for s in trainers) == 1,
        10,
        "exactly one leader",
    )
    leader, follower = sorted(trainers, key=lambda s: not status(s)["trainer"]["is_leader"])
    leader_id, follower_id = (status(s)["trainer"]["id"] for s in (leader, follower))
    assert leader_id != follower_id

    # Both replicas ingest; the leader's model reaches the follower through the model dir.
    accepted = ingest(leader, synthetic_rows(600, seed=1))
    accepted += ingest(follower, synthetic_rows(600, seed=2))
    eventually(
        lambda: (
            status(follower)["model_version"] is not None
            and status(follower)["model_version"] == read_current_version(model_dir)
        ),
        60,
        "the follower serving the leader's first model",
    )
    # Twice more, rows to the follower: the leader trains on them, and the follower serves
    # that model and does not train.
    version = status(leader)["model_version"]
    for seed in (3, 5):
        accepted += ingest(follower, synthetic_rows(400, seed=seed))
        version = next_version_followed(leader, follower, after=version)
    led = ok_retrains(follower)
    assert len(led) >= 2
    assert {r["trainer"] for r in led} == {leader_id}
    assert status(follower)["trainer"]["is_leader"] is False
    assert httpx.post(f"{follower.url}/retrain", timeout=30).json()["outcome"] == "follower"

    # Keep the survivor ingesting through the leader's death and the takeover.
    streamed = 0
    stop = threading.Event()
    failures: list[str] = []

    def stream() -> None:
        nonlocal streamed
        batch = synthetic_rows(BATCH, seed=4)
        with httpx.Client(timeout=10) as client:
            for _ in range(300):  # bounded
                if stop.is_set():
                    return
                reply = client.post(
                    f"{follower.url}/add_training_data_bulk", json={"entries": batch}
                )
                if reply.status_code != 202:
                    failures.append(reply.text)
                    return
                streamed += BATCH
                stop.wait(0.05)  # a batch every 50 ms, until told to stop

    streamer = threading.Thread(target=stream)
    streamer.start()
    try:
        eventually(lambda: streamed >= BATCH, 30, "the survivor's stream under way")
        leader.kill()
        killed_at = time.monotonic()
        eventually(
            lambda: status(follower)["trainer"]["is_leader"],
            TAKEOVER_BOUND_S,
            "the follower taking over",
            interval=0.1,
        )
        takeover_s = time.monotonic() - killed_at
        print(f"\ntakeover after SIGKILL of the leader: {takeover_s:.2f}s")

        # The new leader publishes a model that includes samples the old one never saw.
        def published_by_the_survivor() -> bool:
            newest = ok_retrains(follower)[0]
            published: bool = (
                newest["trainer"] == follower_id
                and newest["version"]
                == read_current_version(model_dir)
                == status(follower)["model_version"]
            )
            return published

        eventually(published_by_the_survivor, 60, "the new leader publishing")
    finally:
        stop.set()
        streamer.join(30)
    assert not failures, failures
    assert streamed >= BATCH
    accepted += streamed

    newest = ok_retrains(follower)[0]
    assert newest["max_sample_id"] > max(r["max_sample_id"] for r in led)
    assert {r["trainer"] for r in ok_retrains(follower)} == {leader_id, follower_id}
    stored = status(follower)
    total = stored["training_data"]["total_samples"] + stored["test_data"]["total_samples"]
    assert total == accepted, "every row answered 202 by either replica is in the store"
