"""Replica health against real prediction servers: one SIGKILLed mid-run costs no caller,
a frozen one (SIGSTOP) costs at most one attempt timeout, and past the caller's deadline
the typed PredictionTimeout arrives on time."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from latency_client import ClientConfig, PredictionTimeout, PredictionUnavailable, PredictorClient
from tests.latency_client.cluster import frozen, row, running_cluster

WORKERS = 20
RUN_S = 4.0
KILL_AT_S = 1.5


async def stream_of_picks(
    client: PredictorClient, seconds: float, failures: list[BaseException]
) -> int:
    """WORKERS callers predicting 100 rows each, back to back, for `seconds` (bounded in
    count too); returns how many predictions were answered."""
    stop_at = time.monotonic() + seconds
    answered = 0

    async def worker(seed: int) -> None:
        nonlocal answered
        rng = random.Random(seed)
        for _ in range(10_000):
            if time.monotonic() >= stop_at:
                return
            rows = [row(rng.randrange(5000)) for _ in range(100)]
            try:
                assert len(await client.predict(rows)) == 100
                answered += 1
            except PredictionUnavailable as exc:
                failures.append(exc)

    await asyncio.gather(*(worker(s) for s in range(WORKERS)))
    return answered


def test_a_replica_killed_mid_run_fails_no_pick(tmp_path: Path) -> None:
    # Budgets above the defaults: the shared machine may stall the survivor for 200 ms,
    # and this test is about failover, not latency (bench_client measures that).
    config = ClientConfig(deadline_s=5.0, attempt_timeout_s=2.5)
    with running_cluster(tmp_path, start_trainer=False) as cluster:
        victim = cluster.predictors[0]

        async def go() -> tuple[int, Any, int]:
            failures: list[BaseException] = []
            async with PredictorClient(cluster.prediction_urls, config=config) as client:
                loop = asyncio.get_running_loop()
                loop.call_later(KILL_AT_S, victim.kill)
                answered = await stream_of_picks(client, RUN_S, failures)
                assert failures == []
                dead = next(r for r in client.replicas.replicas if r.url == victim.url)
                return answered, client.stats(), dead.failures_in_a_row

        answered, stats, dead_failures_in_a_row = asyncio.run(go())
    counters = stats.counters
    assert victim.proc is not None and victim.proc.poll() is not None  # it did die
    assert answered > 0 and counters.unavailable == 0
    assert counters.failovers >= 1 and counters.failovers == counters.retries
    assert dead_failures_in_a_row >= 1  # never answered again: each probe failed


def test_a_frozen_replica_costs_one_attempt_timeout_then_fails_over(tmp_path: Path) -> None:
    config = ClientConfig(deadline_s=3.0, attempt_timeout_s=0.5, backoff_s=60.0)
    with running_cluster(tmp_path, start_trainer=False) as cluster:

        async def go() -> tuple[list[float], Any]:
            async with PredictorClient(cluster.prediction_urls, config=config) as client:
                await client.predict([row(0)])  # connections open to the first replica
                await client.predict([row(1)])  # ... and the second
                walls = []
                with frozen(cluster.predictors[0]):
                    for i in range(4):  # round robin would send two of them to the frozen one
                        started = time.monotonic()
                        assert len(await client.predict([row(i)])) == 1
                        walls.append(time.monotonic() - started)
                return walls, client.stats()

        walls, stats = asyncio.run(go())
    # only the first call meets the frozen replica (then 60 s of back-off): one timeout of
    # 0.5 s plus the answer from the other; the rest go straight to the live one.
    assert stats.counters.failovers == 1 and stats.counters.unavailable == 0
    assert 0.5 <= walls[0] < 2.5 and max(walls[1:]) < 0.5


def test_past_the_deadline_the_caller_gets_prediction_timeout(tmp_path: Path) -> None:
    with running_cluster(tmp_path, start_trainer=False) as cluster:

        async def go() -> tuple[float, BaseException | None, Any]:
            # the defaults: a 400 ms deadline, 200 ms per attempt
            async with PredictorClient(cluster.prediction_urls) as client:
                with frozen(*cluster.predictors):
                    started = time.monotonic()
                    try:
                        await client.predict([row(1)])
                        error = None
                    except PredictionUnavailable as exc:
                        error = exc
                    elapsed = time.monotonic() - started
                return elapsed, error, client.stats()

        elapsed, error, stats = asyncio.run(go())
    assert isinstance(error, PredictionTimeout)
    assert 0.4 <= elapsed < 1.0  # on time: the deadline, not the servers, ended the wait
    assert (stats.counters.timeouts, stats.counters.retries) == (1, 1)
