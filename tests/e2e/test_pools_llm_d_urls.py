"""Two pools in one trainer and two prediction servers, each EPP configured the way llm-d's
Go client is: TRAINING_SERVER_URL / PREDICTION_SERVER_URL set to http://svc/pools/<name>,
to which the client appends its paths. Real processes on 127.0.0.1; one prediction server
reads the trainer's model directory, the other mirrors the bundles over HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from devkit.synthetic import prediction_row, synthetic_rows
from tests.e2e.cluster import Cluster, served_everywhere
from tests.polling import eventually

POOLS = ("h200-llama", "b200-llama")
SLOWER = {"h200-llama": 1.0, "b200-llama": 4.0}  # b200-llama's rows are 4x slower
ROW = prediction_row()


@dataclass(frozen=True)
class GoClientUrls:
    """What an EPP pointed at one pool is given, and the paths llm-d's client appends."""

    training: str  # TRAINING_SERVER_URL
    predictions: list[str]  # PREDICTION_SERVER_URL, comma-separated in the EPP's env

    def add_training_data_bulk(self, rows: list[dict[str, Any]]) -> httpx.Response:
        return httpx.post(f"{self.training}/add_training_data_bulk", json={"entries": rows})

    def predict_bulk_strict(self, url: str, rows: list[dict[str, Any]]) -> httpx.Response:
        return httpx.post(f"{url}/predict/bulk/strict", json={"requests": rows}, timeout=10)


def slower(rows: list[dict[str, Any]], factor: float) -> list[dict[str, Any]]:
    return [
        {
            **r,
            "actual_ttft_ms": r["actual_ttft_ms"] * factor,
            "actual_tpot_ms": r["actual_tpot_ms"] * factor,
        }
        for r in rows
    ]


def data_status(epp: GoClientUrls) -> dict[str, Any]:
    status: dict[str, Any] = httpx.get(f"{epp.training}/data/status").json()
    return status


def stored(epp: GoClientUrls) -> int:
    status = data_status(epp)
    return int(status["training_data"]["total_samples"] + status["test_data"]["total_samples"])


def test_two_pools_through_the_go_client_url_form(cluster: Cluster) -> None:
    trainer, predictors = cluster
    epps = {
        pool: GoClientUrls(
            f"{trainer.url}/pools/{pool}", [f"{p.url}/pools/{pool}" for p in predictors]
        )
        for pool in POOLS
    }
    for pool, epp in epps.items():
        for url in epp.predictions:  # a fresh pool answers, from the prior
            cold = epp.predict_bulk_strict(url, [ROW])
            assert cold.status_code == 200 and cold.json()["model_version"] == "cold-start-prior"
        for seed in range(4):  # the client's 1 s batches, 200 rows each
            rows = slower(synthetic_rows(200, seed=10 * seed + len(pool)), SLOWER[pool])
            assert epp.add_training_data_bulk(rows).status_code == 202

    # One pool's bad rows: only they are refused, and no other pool's store moves.
    bad = [{**r, "input_token_length": -5} for r in synthetic_rows(3, seed=99)]
    assert epps["b200-llama"].add_training_data_bulk(bad).status_code == 422
    half = epps["b200-llama"].add_training_data_bulk(bad + synthetic_rows(2, seed=98))
    assert half.status_code == 202 and half.json()["rejected"] == 3
    counts = {pool: stored(epp) for pool, epp in epps.items()}
    assert counts == {"h200-llama": 800, "b200-llama": 802}
    assert (
        int(httpx.get(f"{trainer.url}/data/status").json()["training_data"]["total_samples"]) == 0
    )

    versions = {
        pool: eventually(
            lambda epp=epp, n=counts[pool]: served_everywhere(  # type: ignore[misc]
                epp.training, epp.predictions, n
            ),
            90.0,
            f"pool {pool} trained on every row and served by both prediction servers",
        )
        for pool, epp in epps.items()
    }
    assert versions["h200-llama"] != versions["b200-llama"]
    for pool, epp in epps.items():
        # Its routes answer its own bundles: the one served everywhere above, or one the
        # loop published since (it keeps retraining, on the live rows it scores).
        answered = {httpx.get(f"{epp.training}/model/download/info").json()["model_version"]}
        for url in epp.predictions:
            answered.add(epp.predict_bulk_strict(url, [ROW]).json()["model_version"])
        retrains = httpx.get(f"{epp.training}/retrains").json()["retrains"]
        assert min(answered) >= versions[pool]
        assert answered <= {r["version"] for r in retrains}
        lines = httpx.get(f"{epp.training}/metrics").text.splitlines()
        # Counts, durations and scores are never negative; a log calibration factor is
        # below 0 whenever the model over-predicts (the conformal one, the live ones).
        negative = [
            line
            for line in lines
            if not line.startswith("#")
            and "log_offset" not in line
            and float(line.rsplit(" ", 1)[1]) < 0
        ]
        assert not negative, negative
        (retrain,) = {r["pool"] for r in retrains}
        assert retrain == pool
        # The mirroring server reports each pool's version (that one or a newer one) to that
        # pool's fleet list.
        eventually(
            lambda epp=epp, pool=pool: any(  # type: ignore[misc]
                s["model_version"] >= versions[pool] and s["on_current_version"]
                for s in httpx.get(f"{epp.training}/prediction_servers").json()["servers"]
            ),
            10.0,
            f"a prediction server reporting {pool}'s version",
        )

    fast, slow = (
        epps[pool].predict_bulk_strict(epps[pool].predictions[1], [ROW]).json()["predictions"][0]
        for pool in POOLS
    )
    assert slow["ttft_ms"] > 2 * fast["ttft_ms"] and slow["tpot_ms"] > 2 * fast["tpot_ms"]
    # The default pool, unprefixed, saw none of it.
    assert httpx.get(f"{trainer.url}/data/status").json()["model_version"] is None
    for predictor in predictors:
        assert httpx.get(f"{predictor.url}/status").json()["model_version"] == "cold-start-prior"
