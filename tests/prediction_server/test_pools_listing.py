"""Named pools mirrored from a trainer that lists every pool's version and live calibration
(GET /pools?calibration=true): one request per interval feeds every pool's watcher, which
asks its pool's own routes only when the listed version is new (and once every
FULL_SYNC_INTERVALS); a trainer that lists neither keeps the per-pool polls. The trainer
is a real HTTP server on 127.0.0.1 that counts the requests it answers.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from prediction_server import watcher
from tests.polling import eventually
from tests.prediction_server.helpers import (
    WAIT_S,
    FakeTrainerHandler,
    http_server,
    running_app,
)
from tests.prediction_server.test_sync import live_calibration_json, trained_archive

POOLS = ("a-pool", "b-pool", "c-pool")
COLD = "d-pool"  # listed before its first bundle: served from the prior until then
V1 = "20260401T000000.000000Z"
V2 = "20260402T000000.000000Z"
ROW = {
    "kv_cache_percentage": 0.5,
    "input_token_length": 4000,
    "num_request_waiting": 1,
    "num_request_running": 8,
    "num_tokens_generated": 1,
    "prefix_cache_score": 0.0,
}


class ListingTrainer:
    """What the fake trainer publishes per pool, and the requests it answered by path."""

    def __init__(self, lists_calibration: bool) -> None:
        self.lists_calibration = lists_calibration
        self.versions: dict[str, str] = {}
        self.archives: dict[tuple[str, str], bytes] = {}
        self.calibrations: dict[str, bytes | None] = {}
        self.requests: Counter[str] = Counter()
        self.lock = threading.Lock()

    def listing(self) -> bytes:
        pools = []
        for name, version in self.versions.items():
            entry: dict[str, Any] = {"name": name, "model_version": version or None}
            if self.lists_calibration:
                data = self.calibrations.get(name)
                entry["live_calibration"] = None if data is None else json.loads(data)
            pools.append(entry)
        return json.dumps({"pools": pools, "max_pools": 100}).encode()

    def answer(self, path: str) -> tuple[bytes, str] | None:
        if path.split("?")[0] == "/pools":
            return self.listing(), "json"
        parts = path.split("/")  # /pools/<name>/<route...>
        if len(parts) < 4 or parts[1] != "pools" or parts[2] not in self.versions:
            return None
        name, route = parts[2], "/" + "/".join(parts[3:])
        version = self.versions[name]
        if route == "/model/download/info":
            return json.dumps({"model_version": version or None}).encode(), "json"
        if route == "/model/export":
            return self.archives[(name, version)], "gzip"
        if route == "/calibration" and self.calibrations.get(name) is not None:
            data = self.calibrations[name]
            assert data is not None
            return data, "json"
        return None


@pytest.fixture(params=[True, False], ids=["lists-calibration", "older-trainer"])
def trainer(request: pytest.FixtureRequest) -> Iterator[tuple[ListingTrainer, str]]:
    state = ListingTrainer(lists_calibration=request.param)

    class Handler(FakeTrainerHandler):
        def do_GET(self) -> None:
            with state.lock:
                state.requests[self.path.split("?")[0]] += 1
                found = state.answer(self.path)
            if found is None:
                self.send_error(404)
                return
            self.reply(*found)

        def do_POST(self) -> None:  # the fleet reports
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            with state.lock:
                state.requests[self.path] += 1
            self.reply(b"{}")

    with http_server(Handler) as url:
        yield state, url


def pool_version(client: TestClient, pool: str) -> str:
    version: str = client.get(f"/pools/{pool}/status").json()["model_version"]
    return version


def ttft(client: TestClient, pool: str) -> float:
    answer: float = client.post(f"/pools/{pool}/predict", json=ROW).json()["ttft_ms"]
    return answer


def test_pools_follow_the_listing_and_ask_their_routes_only_on_news(
    tmp_path: Path, trainer: tuple[ListingTrainer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No safety-net sync during the test: what a listed pool serves, it learnt from a wake.
    monkeypatch.setattr(watcher, "FULL_SYNC_INTERVALS", 10_000)
    state, url = trainer
    for seed, pool in enumerate((*POOLS, COLD)):
        (tmp_path / pool).mkdir()
        state.archives[(pool, V1)] = trained_archive(tmp_path / pool, V1, seed=seed)
    state.archives[("a-pool", V2)] = trained_archive(tmp_path / "a-pool", V2, seed=10)
    with state.lock:
        state.versions = dict.fromkeys(POOLS, V1)
        state.versions[COLD] = ""  # listed, nothing published yet
    with running_app(
        tmp_path / "models",
        sync_from_trainer=True,
        training_server_url=url,
        model_sync_interval_sec=0.05,
    ) as client:
        eventually(
            lambda: all(pool_version(client, p) == V1 for p in POOLS), WAIT_S, "every pool on V1"
        )
        plain = ttft(client, "b-pool")
        with state.lock:
            state.requests.clear()
        eventually(lambda: state.requests["/pools"] >= 40, WAIT_S, "listings polled")
        with state.lock:
            polls = state.requests["/pools"]
            infos = [state.requests[f"/pools/{p}/model/download/info"] for p in POOLS]
            reports = [state.requests[f"/pools/{p}/prediction_servers/report"] for p in POOLS]
        if state.lists_calibration:  # nothing new, nothing asked (nor reported)
            assert max(infos) == max(reports) == 0, (polls, infos, reports)
            assert state.requests["/pools/b-pool/calibration"] == 0
        else:  # every watcher asks its pool's routes at every poll, as before
            assert min(infos) >= polls / 3, (polls, infos)

        # News: a pool's new version is served, a cold pool's first, and factors applied.
        assert pool_version(client, COLD) == "cold-start-prior"
        with state.lock:
            state.versions["a-pool"] = V2
            state.versions[COLD] = V1
            state.calibrations["b-pool"] = live_calibration_json(ttft=0.5, tpot=0.0)
        eventually(lambda: pool_version(client, "a-pool") == V2, WAIT_S, "a-pool's V2 served")
        eventually(lambda: pool_version(client, COLD) == V1, WAIT_S, "the cold pool's V1 served")
        eventually(
            lambda: ttft(client, "b-pool") == pytest.approx(plain * math.exp(0.5), rel=1e-6),
            WAIT_S,
            "b-pool's live calibration applied",
        )
        assert pool_version(client, "c-pool") == V1
        with state.lock:
            state.calibrations["b-pool"] = None  # the trainer has none any more
        eventually(
            lambda: ttft(client, "b-pool") == pytest.approx(plain, rel=1e-6),
            WAIT_S,
            "b-pool's own answers back",
        )
