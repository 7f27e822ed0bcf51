"""latency_client pointed at one pool: base URLs of the form http://svc/pools/<name>, as an
EPP's are. Its predictions come from that pool's bundle and its training rows land in that
pool's store, never the default pool's (real servers on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

from devkit.synthetic import publish_trained_bundle
from latency_client import SyncPredictorClient
from tests.latency_client.cluster import row, running_cluster, stored_rows, training_row
from tests.polling import eventually

POOL = "h200-llama"


def test_predictions_and_rows_stay_in_the_pool_of_the_urls(tmp_path: Path) -> None:
    pool_version = publish_trained_bundle(tmp_path / "models" / "pools" / POOL, seed=1).version
    with running_cluster(
        tmp_path,
        predictors=1,
        LATENCY_RETRAINING_INTERVAL_SEC="3600",
        LATENCY_EARLY_RETRAINS="false",
    ) as cluster:
        urls = [f"{url}/pools/{POOL}" for url in cluster.prediction_urls]
        trainer = f"{cluster.trainer.url}/pools/{POOL}"
        with SyncPredictorClient(urls, trainer) as client:
            answers = client.predict([row(i) for i in range(3)])
            assert {a.model_version for a in answers} == {pool_version}
            # the pool's bundle has trees (20 each), which the answers count for the picker
            assert (
                min(min(a.ttft_model_splits or 0, a.tpot_model_splits or 0) for a in answers) >= 20
            )
            for i in range(7):
                client.record(training_row(i))
            assert client.flush()
        eventually(lambda: stored_rows(trainer) == 7, 10.0, "the rows in the pool's store")
        assert stored_rows(cluster.trainer.url) == 0
        with SyncPredictorClient(cluster.prediction_urls) as default_client:
            (answer,) = default_client.predict([row(0)])
            assert answer.model_version == "cold-start-prior"
            assert (answer.ttft_model_splits, answer.tpot_model_splits) == (0, 0)
