"""The predicted policies on a prefill/decode pool, in the closed loop with real servers:
both picks of a split request observed, rows per role reaching the trainer, served p90s
scored per role."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from poolsim.engine import Engine
from poolsim.hardware import H200
from poolsim.latency_first import LatencyFirstPolicy
from poolsim.policies import make_policy
from poolsim.policy_api import PolicyOptions
from poolsim.predicted import PredictorPolicy
from poolsim.roles import PdConfig
from poolsim.workloads import generate
from shared.artifact import CURRENT_POINTER, MANIFEST, VERSIONS_DIR
from tests.latency_client.cluster import running_cluster
from tests.polling import eventually

ROLES = ("prefill", "decode", "decode")


@pytest.mark.parametrize("name", ["latency-first", "predicted-latency"])
def test_a_pd_pool_runs_the_predicted_policy_in_each_profile(tmp_path: Path, name: str) -> None:
    requests = generate("chat", 3, 8.0, seed=2)
    with running_cluster(tmp_path, predictors=1) as cluster:
        options = PolicyOptions(
            seed=1,
            speedup=10.0,
            training_url=cluster.trainer.url,
            prediction_urls=tuple(cluster.prediction_urls),
            max_model_age_s=0.0,
        )
        policy = make_policy(name, 1, options=options)
        assert isinstance(policy, PredictorPolicy)
        engine = Engine(requests, 3, H200, policy, speedup=10.0, pd=PdConfig(ROLES))
        result = asyncio.run(engine.run())
        store = tmp_path / "store.db"
        with sqlite3.connect(store) as db:
            kinds = dict(
                ((pod_type, measures), count)
                for pod_type, measures, count in db.execute(
                    "SELECT pod_type, measures, COUNT(*) FROM samples GROUP BY 1, 2"
                )
            )
    assert len(result.completions) == len(requests) and not result.unfinished
    assert not policy.pending  # both picks of every split request were observed
    split = sum(route.prefill is not None for route in result.pd_routes.values())
    assert 0 < split <= len(requests)
    # the trainer got the rows llm-d's plugin sends: TTFT (measures 1) from the prefill
    # pod per split request, TPOT (2) from the decode pod; whole requests both from decode
    assert kinds[("prefill", 1)] == split
    assert ("prefill", 2) not in kinds
    whole = len(requests) - split
    assert kinds.get(("decode", 1), 0) == whole
    tpot_rows = sum(1 for done in result.completions if done.tpot_ms is not None)
    assert kinds[("decode", 2)] == tpot_rows
    summary = result.policy_summary
    assert summary["served_ttft_rows@prefill"] == split
    assert 0.0 <= summary["served_ttft_coverage@prefill"] <= 1.0
    assert summary["served_tpot_rows@decode"] == tpot_rows
    assert "served_tpot_rows@prefill" not in summary
    rules = [key for key in summary if key.startswith("rule_")]
    assert any(key.startswith("rule_decode:") for key in rules)
    assert any(key.startswith("rule_prefill:") for key in rules)


def test_the_trained_bundles_take_pod_type_as_a_feature(tmp_path: Path) -> None:
    # a short P/D run's rows train a bundle: both targets name pod_type_code
    requests = generate("chat", 3, 8.0, seed=4)
    with running_cluster(tmp_path, predictors=1) as cluster:
        options = PolicyOptions(
            seed=2,
            speedup=10.0,
            training_url=cluster.trainer.url,
            prediction_urls=tuple(cluster.prediction_urls),
            max_model_age_s=0.0,
        )
        engine = Engine(
            requests, 3, H200, LatencyFirstPolicy(options), speedup=10.0, pd=PdConfig(ROLES)
        )
        asyncio.run(engine.run())  # its rows are all sent when the run closes
        manifest = trained_manifest(tmp_path / "models")
    for target in ("ttft", "tpot"):
        assert "pod_type_code" in manifest["targets"][target]["features"]


def trained_manifest(models: Path) -> dict[str, Any]:
    """The published bundle's manifest once a trained one is out (the trainer retrains
    every second)."""

    def trained() -> dict[str, Any] | None:
        current = models / CURRENT_POINTER
        if not current.is_file():
            return None
        version = current.read_text().strip()
        manifest: dict[str, Any] = json.loads(
            (models / VERSIONS_DIR / version / MANIFEST).read_text()
        )
        return manifest if manifest["targets"]["ttft"]["file"] is not None else None

    found: dict[str, Any] = eventually(trained, 30, "a trained bundle published")
    return found
