"""PredictorClient.predict against two real prediction servers: concurrent callers merged
into fewer calls, each getting exactly its own rows back in order."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from latency_client import ClientConfig, PredictionRejected, PredictorClient
from tests.latency_client.cluster import Cluster, frozen, row, running_cluster, strict_call

# Correctness, not latency: budgets generous enough for a loaded shared machine.
PATIENT = ClientConfig(deadline_s=20.0, attempt_timeout_s=10.0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("coalescing"), start_trainer=False) as c:
        yield c


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_200_concurrent_callers_get_their_own_rows_in_order(cluster: Cluster) -> None:
    rng = random.Random(16)
    callers = [[row(1000 * c + j) for j in range(rng.randint(1, 100))] for c in range(200)]

    async def go() -> tuple[list[Any], Any]:
        async with PredictorClient(cluster.prediction_urls, config=PATIENT) as client:
            answers = await asyncio.gather(*(client.predict(rows) for rows in callers))
            return answers, client.stats()

    answers, stats = run(go())
    for rows, answer in zip(callers, answers, strict=True):
        expected = strict_call(cluster.prediction_urls[0], rows)  # the same rows, alone
        assert [(a.ttft_ms, a.tpot_ms, a.model_version) for a in answer] == expected
    counters = stats.counters
    total = sum(len(rows) for rows in callers)
    assert counters.callers == 200 and counters.rows == total and counters.unavailable == 0
    # every call holds at most 1,000 rows: at least ceil(total / 1000) calls, far below 200
    assert -(-total // 1000) <= counters.calls < 200
    assert stats.merged_callers_per_call == 200 / counters.calls


def test_calls_respect_max_rows_per_call_and_max_in_flight(cluster: Cluster) -> None:
    # 20 callers x 50 rows at once, 250 rows per call, one call at a time: the first call
    # leaves with callers 1-5 (250 rows), the other 15 wait for the slot and leave in
    # three more full calls: 4 calls of 5 callers.
    config = ClientConfig(
        max_rows_per_caller=50,
        max_rows_per_call=250,
        max_in_flight=1,
        deadline_s=20.0,
        attempt_timeout_s=10.0,
    )
    callers = [[row(100 * c + j) for j in range(50)] for c in range(20)]

    async def go() -> Any:
        async with PredictorClient(cluster.prediction_urls, config=config) as client:
            answers = await asyncio.gather(*(client.predict(rows) for rows in callers))
            assert [len(a) for a in answers] == [50] * 20
            return client.stats()

    stats = run(go())
    assert (stats.counters.calls, stats.counters.rows, stats.merged_callers_per_call) == (
        4,
        1000,
        5.0,
    )


def test_a_caller_over_max_rows_per_caller_travels_in_parts_and_keeps_its_order(
    cluster: Cluster,
) -> None:
    rows = [row(j) for j in range(250)]  # parts of 100, 100, 50

    async def go() -> Any:
        async with PredictorClient(cluster.prediction_urls, config=PATIENT) as client:
            return await client.predict(rows)

    answer = run(go())
    assert [(a.ttft_ms, a.tpot_ms, a.model_version) for a in answer] == strict_call(
        cluster.prediction_urls[1], rows
    )


def test_the_window_merges_callers_that_arrive_within_it(cluster: Cluster) -> None:
    async def two_callers(config: ClientConfig) -> int:
        async with PredictorClient(cluster.prediction_urls, config=config) as client:
            first = asyncio.create_task(client.predict([row(1)]))
            await asyncio.sleep(0.02)
            await asyncio.gather(first, client.predict([row(2)]))
            return client.stats().counters.calls

    # The Go client's rule (always wait): 20 ms apart within a 300 ms window -> one call.
    go_rule = ClientConfig(
        window_s=0.3, min_expected_merge=0.0, deadline_s=20.0, attempt_timeout_s=10.0
    )
    assert run(two_callers(go_rule)) == 1
    # Default rule: a lone caller at a low rate does not wait for a window -> two calls.
    assert run(two_callers(PATIENT)) == 2


def test_a_caller_with_an_invalid_row_costs_only_itself(cluster: Cluster) -> None:
    good_a, good_b = [row(1), row(2)], [row(3)]
    bad = [row(4), row(5, kv_cache_percentage=1.5)]  # above 1: the server answers 422

    async def go() -> tuple[tuple[Any, ...], Any]:
        async with PredictorClient(cluster.prediction_urls, config=PATIENT) as client:
            answers = await asyncio.gather(
                client.predict(good_a),
                client.predict(bad),
                client.predict(good_b),
                return_exceptions=True,
            )
            return answers, client.stats()

    (a, rejected, b), stats = run(go())
    assert isinstance(rejected, PredictionRejected)
    detail = rejected.detail
    assert isinstance(detail, list) and detail[0]["loc"][-1] == "kv_cache_percentage"
    assert [(p.ttft_ms, p.tpot_ms, p.model_version) for p in a] == strict_call(
        cluster.prediction_urls[0], good_a
    )
    assert len(b) == 1
    assert (stats.counters.rejected_callers, stats.counters.unavailable) == (1, 1)


def test_a_backlog_is_served_newest_first(tmp_path: Path) -> None:
    # One call at a time, one row per call. Caller 0's call hangs on a frozen server while
    # callers 1-4 queue behind it; once it answers, the backlog goes out newest first:
    # the oldest callers are the likeliest to expire in flight under overload.
    config = ClientConfig(
        max_rows_per_caller=1,
        max_rows_per_call=1,
        max_in_flight=1,
        deadline_s=20.0,
        attempt_timeout_s=10.0,
    )
    with running_cluster(tmp_path, predictors=1, start_trainer=False) as single:

        async def go() -> list[int]:
            answered: list[int] = []

            async def caller(i: int) -> None:
                await client.predict([row(i)])
                answered.append(i)

            async with PredictorClient(single.prediction_urls, config=config) as client:
                await client.predict([row(99)])  # a keep-alive connection is open
                with frozen(single.predictors[0]):
                    first = asyncio.create_task(caller(0))
                    await asyncio.sleep(0.2)  # caller 0's call is in flight, unanswered
                    later = [asyncio.create_task(caller(i)) for i in range(1, 5)]
                    await asyncio.sleep(0.2)  # they queue: the only call slot is taken
                await asyncio.gather(first, *later)
            return answered

        assert run(go()) == [0, 4, 3, 2, 1]
