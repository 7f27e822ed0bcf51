"""record() against a real training server: rows flushed every second, none lost while the
trainer is down for 5 s and restarted on the same store, drops past the bound counted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latency_client import ClientConfig, ClientStats, PredictorClient
from tests.latency_client.cluster import running_cluster, stored_rows, training_row
from tests.polling import eventually

DOWN_S = 5.0
ROWS_PER_TICK = 20
TICK_S = 0.05


async def record_for(client: PredictorClient, seconds: float, first: int) -> int:
    """ROWS_PER_TICK rows every TICK_S for `seconds`; returns the next row number."""
    stop_at = time.monotonic() + seconds
    i = first
    while time.monotonic() < stop_at and i - first < 100_000:
        for _ in range(ROWS_PER_TICK):
            client.record(training_row(i))
            i += 1
        await asyncio.sleep(TICK_S)  # pacing: the load, not a wait for a condition
    return i


async def stats_when(
    client: PredictorClient, ready: Callable[[ClientStats], bool], timeout: float, what: str
) -> ClientStats:
    """The client's stats once `ready` holds for them: polled from a thread, so that the
    client flushes on its loop meanwhile, and read on that loop (which mutates them)."""
    loop = asyncio.get_running_loop()

    async def read() -> ClientStats:
        return client.stats()

    def probe() -> ClientStats | None:
        stats = asyncio.run_coroutine_threadsafe(read(), loop).result(10)
        return stats if ready(stats) else None

    return await asyncio.to_thread(eventually, probe, timeout, what)


async def settled(client: PredictorClient, recorded: int, timeout: float) -> ClientStats:
    """Wait (bounded) until the client has nothing buffered and every row is accounted for."""

    def accounted_for(stats: ClientStats) -> bool:
        c = stats.counters
        return stats.feedback_buffered == 0 and c.feedback_sent + c.feedback_dropped >= recorded

    return await stats_when(client, accounted_for, timeout, f"all {recorded} rows settled")


async def failed_flush(client: PredictorClient, timeout: float = 10.0) -> None:
    await stats_when(
        client,
        lambda stats: stats.counters.feedback_failed_flushes > 0,
        timeout,
        "a failed flush attempt",
    )


def test_no_row_is_lost_while_the_trainer_is_down_for_5_s(tmp_path: Path) -> None:
    with running_cluster(tmp_path, predictors=1) as cluster:
        trainer = cluster.trainer

        async def go() -> tuple[int, Any]:
            async with PredictorClient(cluster.prediction_urls, trainer.url) as client:
                n = await record_for(client, 1.5, 0)
                trainer.kill()  # SIGKILL, possibly during a flush
                n = await record_for(client, DOWN_S, n)
                down_stats = client.stats()
                assert down_stats.counters.feedback_failed_flushes >= 1
                assert down_stats.feedback_buffered > 0
                await asyncio.to_thread(trainer.start)  # same port, same SQLite store
                n = await record_for(client, 1.0, n)
                return n, await settled(client, n, timeout=30.0)

        recorded, stats = asyncio.run(go())
        stored = stored_rows(trainer.url)
    c = stats.counters
    assert c.feedback_recorded == recorded and c.feedback_dropped == 0
    assert c.feedback_rejected == 0 and c.feedback_sent >= recorded
    # Nothing lost. A flush the trainer committed just before the kill but never answered
    # is sent again (at least once delivery), so the store may hold that chunk twice.
    assert recorded <= stored <= c.feedback_sent


def test_rows_beyond_the_bound_are_dropped_oldest_first_and_counted(tmp_path: Path) -> None:
    config = ClientConfig(max_buffered_rows=100, flush_interval_s=0.2)
    with running_cluster(tmp_path, predictors=1, start_trainer=False) as cluster:
        trainer = cluster.trainer  # not started: its port refuses connections

        async def go() -> Any:
            async with PredictorClient(
                cluster.prediction_urls, trainer.url, config=config
            ) as client:
                for i in range(150):
                    client.record(training_row(i))
                full = client.stats()
                assert (full.feedback_buffered, full.counters.feedback_dropped) == (100, 50)
                await failed_flush(client)  # an attempt met the closed port
                await asyncio.to_thread(trainer.start)
                return await settled(client, 150, timeout=30.0)

        stats = asyncio.run(go())
        stored = stored_rows(trainer.url)
    c = stats.counters
    assert (c.feedback_recorded, c.feedback_dropped, c.feedback_sent, stored) == (150, 50, 100, 100)


def test_rows_still_buffered_at_close_are_counted_as_dropped(tmp_path: Path) -> None:
    config = ClientConfig(close_drain_timeout_s=0.5)
    with running_cluster(tmp_path, predictors=1, start_trainer=False) as cluster:

        async def go() -> Any:
            client = PredictorClient(cluster.prediction_urls, cluster.trainer.url, config=config)
            for i in range(10):
                client.record(training_row(i))
            await client.aclose()  # the trainer never came up
            return client.stats()

        stats = asyncio.run(go())
    assert (stats.counters.feedback_dropped, stats.feedback_buffered) == (10, 0)


def test_invalid_rows_are_counted_as_rejected_not_retried(tmp_path: Path) -> None:
    with running_cluster(tmp_path, predictors=1) as cluster:

        async def go() -> Any:
            async with PredictorClient(cluster.prediction_urls, cluster.trainer.url) as client:
                client.record(training_row(1))
                client.record({**training_row(2), "kv_cache_percentage": 7.0})  # invalid
                assert await client.flush()
                return client.stats()

        stats = asyncio.run(go())
        stored = stored_rows(cluster.trainer.url)
    c = stats.counters
    assert (c.feedback_sent, c.feedback_rejected, c.feedback_flushes, stored) == (1, 1, 1, 1)
