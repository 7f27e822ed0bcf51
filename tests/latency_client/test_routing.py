"""choose_pod and completion_rows: the README's router wiring against real servers, and the
training rows of a completed request worked out by hand."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from devkit.processes import free_port
from latency_client import (
    PodState,
    Prediction,
    PredictorClient,
    RequestInfo,
    choose_pod,
    completion_rows,
    prediction_row,
)
from tests.latency_client.cluster import running_cluster, stored_rows

POD = PodState("a", kv_cache_percentage=0.25, num_request_waiting=1, running_requests=2)


def test_completion_rows_of_a_streaming_request() -> None:
    request = RequestInfo(300, ttft_slo_ms=500.0, tpot_slo_ms=40.0)
    acted_on = Prediction(150.0, 30.0, "v7")
    ttft_row, tpot_row = completion_rows(
        request, POD, acted_on, ttft_ms=120.0, e2e_ms=1120.0, output_tokens=11
    )
    features = prediction_row(request, POD)
    predicted = {"predicted_ttft_ms": 150.0, "predicted_tpot_ms": 30.0}
    assert ttft_row == {**features, **predicted, "actual_ttft_ms": 120.0, "actual_tpot_ms": 0.0}
    # TPOT = (e2e - TTFT) / (output tokens - 1) = (1120 - 120) / 10 = 100 ms
    assert tpot_row == {
        **features,
        **predicted,
        "num_tokens_generated": 11,
        "actual_ttft_ms": 0.0,
        "actual_tpot_ms": 100.0,
    }


def test_no_tpot_row_without_streaming_or_a_second_token() -> None:
    batch = RequestInfo(300, streaming=False)
    assert len(completion_rows(batch, POD, None, ttft_ms=80.0, e2e_ms=900.0, output_tokens=40)) == 1
    one_token = RequestInfo(300)
    (row,) = completion_rows(one_token, POD, None, ttft_ms=80.0, e2e_ms=90.0, output_tokens=1)
    assert "predicted_ttft_ms" not in row and row["actual_ttft_ms"] == 80.0


def test_a_router_picks_with_predictions_and_sends_the_rows_back(tmp_path: Path) -> None:
    pods = [PodState(f"pod-{i}", kv_cache_percentage=0.1 * i, running_requests=i) for i in range(5)]
    request = RequestInfo(800, ttft_slo_ms=5000.0, tpot_slo_ms=100.0)
    with running_cluster(
        tmp_path,
        predictors=2,
        LATENCY_RETRAINING_INTERVAL_SEC="3600",
        LATENCY_EARLY_RETRAINS="false",
    ) as cluster:

        async def route() -> tuple[object, object]:
            async with PredictorClient(cluster.prediction_urls, cluster.trainer.url) as client:
                choice = await choose_pod(client, request, pods, random.Random(1))
                assert choice.pod is not None
                for row in completion_rows(
                    request,
                    choice.pod,
                    choice.prediction,
                    ttft_ms=210.0,
                    e2e_ms=2210.0,
                    output_tokens=101,
                ):
                    client.record(row)
                assert await client.flush()
                return choice.rule, choice.prediction

        rule, prediction = asyncio.run(route())
        assert rule == "positive"  # the cold-start prior fits these SLOs on every pod
        assert isinstance(prediction, Prediction)
        assert prediction.model_version == "cold-start-prior"
        assert stored_rows(cluster.trainer.url) == 2


def test_with_every_replica_unreachable_the_pick_falls_back_to_the_composite_score() -> None:
    pods = [
        PodState("busy", kv_cache_percentage=0.9, num_request_waiting=4),
        PodState("free", kv_cache_percentage=0.1),
    ]

    async def route() -> tuple[str, int]:
        dead = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]  # nothing listens
        async with PredictorClient(dead) as client:
            choice = await choose_pod(client, RequestInfo(100), pods, random.Random(2))
            return choice.rule, client.stats().counters.unavailable

    assert asyncio.run(route()) == ("composite", 1)
