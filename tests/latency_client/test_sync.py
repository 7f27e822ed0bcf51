"""SyncPredictorClient from plain threads against real servers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from latency_client import ClientClosed, ClientConfig, SyncPredictorClient
from tests.latency_client.cluster import (
    row,
    running_cluster,
    stored_rows,
    strict_call,
    training_row,
)

THREADS = 8
CALLS = 20


def test_threads_share_one_client_and_get_their_own_answers(tmp_path: Path) -> None:
    config = ClientConfig(deadline_s=20.0, attempt_timeout_s=10.0)
    # No retrain during the test: every answer comes from the same (prior) model.
    with running_cluster(
        tmp_path, LATENCY_RETRAINING_INTERVAL_SEC="3600", LATENCY_EARLY_RETRAINS="false"
    ) as cluster:
        answers: dict[int, list[tuple[float, float, str]]] = {}
        with SyncPredictorClient(
            cluster.prediction_urls, cluster.trainer.url, config=config
        ) as client:

            def worker(t: int) -> None:
                for c in range(CALLS):
                    rows = [row(1000 * t + 10 * c + j) for j in range(5)]
                    answers[t * CALLS + c] = [
                        (p.ttft_ms, p.tpot_ms, p.model_version) for p in client.predict(rows)
                    ]
                    client.record(training_row(t * CALLS + c))

            threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert client.flush()
            stats = client.stats()
        with pytest.raises(ClientClosed):
            client.predict([row(0)])  # closed: its loop is gone, the caller hears it at once
        for key, answer in answers.items():
            t, c = divmod(key, CALLS)
            expected = strict_call(
                cluster.prediction_urls[0], [row(1000 * t + 10 * c + j) for j in range(5)]
            )
            assert answer == expected
        assert len(answers) == THREADS * CALLS
        assert stats.counters.callers == THREADS * CALLS
        assert stats.counters.feedback_sent == THREADS * CALLS
        assert stored_rows(cluster.trainer.url) == THREADS * CALLS
