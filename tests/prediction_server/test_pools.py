"""Pools on a prediction server: each named pool's newest bundle served under
/pools/<name>, found in the shared model directory; a pool not published yet answers from
the prior; per-pool status and metrics; the pool limit."""

from __future__ import annotations

from pathlib import Path

from devkit.synthetic import prediction_row, publish_trained_bundle
from prediction_server.pools import ServedPools
from tests.apps import app_of
from tests.polling import eventually
from tests.prediction_server.helpers import WAIT_S, FakeTrainerHandler, http_server, running_app

ROW = prediction_row()


def test_each_pool_answers_from_its_own_bundle(tmp_path: Path) -> None:
    models = tmp_path / "models"
    default = publish_trained_bundle(models, seed=1).version
    h200 = publish_trained_bundle(models / "pools" / "h200-llama", seed=2).version
    with running_app(models) as client:
        assert client.post("/predict", json=ROW).json()["model_version"] == default
        answer = client.post("/pools/h200-llama/predict/bulk/strict", json={"requests": [ROW]})
        assert answer.status_code == 200 and answer.json()["model_version"] == h200
        status = client.get("/pools/h200-llama/status").json()
        assert status["model_version"] == h200 and status["cold_start"] is False
        # A pool published after start-up is found within a few polls.
        b200 = publish_trained_bundle(models / "pools" / "b200-llama", seed=3).version
        eventually(
            lambda: client.get("/pools/b200-llama/status").json()["model_version"] == b200,
            WAIT_S,
            "the new pool served",
        )
        # And a newer bundle of a pool replaces its old one, leaving the others alone.
        newer = publish_trained_bundle(models / "pools" / "h200-llama", seed=4).version
        eventually(
            lambda: client.get("/pools/h200-llama/status").json()["model_version"] == newer,
            WAIT_S,
            "the pool's newer bundle served",
        )
        assert client.get("/status").json()["model_version"] == default


def test_a_pool_not_published_answers_from_the_prior(tmp_path: Path) -> None:
    models = tmp_path / "models"
    default = publish_trained_bundle(models, seed=5).version
    with running_app(models) as client:
        answer = client.post("/pools/nowhere/predict/bulk/strict", json={"requests": [ROW]})
        assert answer.status_code == 200
        assert answer.json()["model_version"] == "cold-start-prior"
        assert client.get("/pools/nowhere/status").json()["cold_start"] is True
        assert client.post("/pools/nowhere/reload").json()["loaded"] is False
        assert client.get("/status").json()["model_version"] == default
        bad = client.post("/pools/No_Way/predict/bulk/strict", json={"requests": [ROW]})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["path", "pool"]


def test_metrics_name_the_pool_and_the_limit_caps_pools_served(tmp_path: Path) -> None:
    models = tmp_path / "models"
    publish_trained_bundle(models / "pools" / "a-pool", seed=6)
    publish_trained_bundle(models / "pools" / "b-pool", seed=7)
    with running_app(models, max_pools=2) as client:  # the default and one named pool
        served = [
            p
            for p in ("a-pool", "b-pool")
            if not client.get(f"/pools/{p}/status").json()["cold_start"]
        ]
        assert served == ["a-pool"]  # found in name order; the second is past the limit
        client.post("/pools/a-pool/predict/bulk/strict", json={"requests": [ROW, ROW]})
        lines = client.get("/metrics").text.splitlines()
        assert 'latency_predicted_rows_total{pool="a-pool",route="strict"} 2.0' in lines
        assert any(line.startswith('latency_model_reloads_total{pool="a-pool"}') for line in lines)
        assert not any('pool="b-pool"' in line for line in lines)


class OldTrainer(FakeTrainerHandler):
    """A trainer from before pools: no /pools route (404), no bundle yet."""

    def do_GET(self) -> None:
        self.reply(b'{"detail":"Not Found"}', status=404)


def test_a_trainer_from_before_pools_leaves_the_mirror_on_its_one_pool(tmp_path: Path) -> None:
    with (
        http_server(OldTrainer) as url,
        running_app(tmp_path / "models", training_server_url=url, sync_from_trainer=True) as client,
    ):
        reply = client.post("/pools/h200-llama/reload")
        assert reply.status_code == 200 and reply.json()["loaded"] is False
        pools: ServedPools = app_of(client).state.pools
        assert client.portal is not None
        assert client.portal.call(pools.discover) == []  # no error: no pools there
        assert client.get("/status").json()["model_source"] == "trainer-sync"
