"""Every training-server metric is exported with HELP and TYPE, and each one moves when what
it counts happens (the ones not covered next to their feature's tests)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from devkit.synthetic import synthetic_rows
from tests.training_server.conftest import ingest, train
from training_server.metrics import TrainingMetrics


def samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(client: TestClient, name: str, **labels: str) -> float:
    return samples(client).get((name, tuple(sorted(labels.items()))), 0.0)


def test_every_registered_family_is_exported_with_help_and_type(client: TestClient) -> None:
    ours = {family.name for family in TrainingMetrics().registry.collect()}
    text = client.get("/metrics").text
    for name in ours:
        kind = "counter" if f"# TYPE {name}_total counter" in text else None
        assert f"# HELP {name}" in text, name
        assert kind or f"# TYPE {name} " in text, name


def test_rejected_rows_count_by_reason_and_ingestion_is_timed(client: TestClient) -> None:
    rows = synthetic_rows(5, seed=1)
    rows[3]["kv_cache_percentage"] = 7.0
    before = value(client, "latency_ingest_duration_seconds_count")
    client.post("/add_training_data_bulk", json={"entries": rows})
    assert value(client, "latency_samples_rejected_total", reason="invalid") == 1.0
    assert value(client, "latency_samples_accepted_total") == 4.0
    assert value(client, "latency_ingest_duration_seconds_count") == before + 1


def test_store_size_follows_the_store(client: TestClient) -> None:
    ingest(client, synthetic_rows(50, seed=2))
    status = client.get("/data/status").json()
    for split, key in (("train", "training_data"), ("test", "test_data")):
        for target in ("ttft", "tpot"):
            assert (
                value(client, "latency_store_samples", split=split, target=target)
                == status[key][f"{target}_samples"]
            )
    assert status["training_data"]["total_samples"] + status["test_data"]["total_samples"] == 50
    assert (
        sum(
            value(client, "latency_store_samples", split=s, target=t)
            for s in ("train", "test")
            for t in ("ttft", "tpot")
        )
        >= 50
    )  # each row: 1-2


def test_a_retrain_sets_its_metrics_per_target(client: TestClient) -> None:
    train(client, n=400, seed=3)
    latest = client.get("/retrains").json()["retrains"][0]
    for target in ("ttft", "tpot"):
        for metric in ("mae", "rmse", "pinball_loss", "coverage"):
            assert (
                value(client, "latency_retrain_metric", target=target, metric=metric)
                == latest[f"{target}_{metric}"]
            )
    assert value(client, "latency_retrains_total", status="ok") == 1.0
