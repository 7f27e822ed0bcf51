"""Many pools in one training server: routes under /pools/<name>, one store with a pool
column, a bundle, history and metrics per pool, the pool limit and name checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from devkit.synthetic import prediction_row, synthetic_rows
from shared.artifact import read_current_version
from tests.apps import app_of
from tests.training_server.conftest import OpenClient
from tests.training_server.test_store_pools import statements
from training_server.pools import PoolRegistry, PoolView

H200, B200 = "/pools/h200-llama", "/pools/b200-llama"


def ingest_into(client: TestClient, prefix: str, rows: list[dict[str, Any]]) -> None:
    reply = client.post(f"{prefix}/add_training_data_bulk", json={"entries": rows})
    assert reply.status_code == 202, reply.text


def slower(rows: list[dict[str, Any]], factor: float) -> list[dict[str, Any]]:
    return [
        {
            **r,
            "actual_ttft_ms": r["actual_ttft_ms"] * factor,
            "actual_tpot_ms": r["actual_tpot_ms"] * factor,
        }
        for r in rows
    ]


def stored(client: TestClient, prefix: str) -> int:
    status = client.get(f"{prefix}/data/status").json()
    return int(status["training_data"]["total_samples"] + status["test_data"]["total_samples"])


def test_each_pool_keeps_its_rows_model_and_history(open_client: OpenClient) -> None:
    client = open_client()
    ingest_into(client, H200, synthetic_rows(400, seed=1))
    ingest_into(client, B200, slower(synthetic_rows(300, seed=2), 4.0))
    assert (stored(client, H200), stored(client, B200), stored(client, "")) == (400, 300, 0)

    assert client.post(f"{H200}/retrain").json()["outcome"] == "ok"
    assert client.post(f"{B200}/retrain").json()["outcome"] == "ok"
    assert client.post("/retrain").json()["outcome"] == "skipped"  # default: no rows

    versions = {p: client.get(f"{p}/data/status").json()["model_version"] for p in (H200, B200)}
    assert None not in versions.values() and versions[H200] != versions[B200]
    assert client.get("/data/status").json()["model_version"] is None
    for prefix in (H200, B200):
        (entry,) = client.get(f"{prefix}/retrains").json()["retrains"]
        assert entry["pool"] == prefix.rsplit("/", 1)[1] and entry["version"] == versions[prefix]
    assert client.get("/retrains").json()["retrains"] == []

    row = prediction_row()
    fast = client.post(f"{H200}/predict", json=row).json()
    slow = client.post(f"{B200}/predict", json=row).json()
    assert slow["ttft_ms"] > 2 * fast["ttft_ms"] and slow["tpot_ms"] > 2 * fast["tpot_ms"]
    assert client.post("/predict", json=row).json()["model_version"] == "cold-start-prior"

    settings = app_of(client).state.settings
    for prefix in (H200, B200):
        pool_dir = settings.model_dir / "pools" / prefix.rsplit("/", 1)[1]
        assert read_current_version(pool_dir) == versions[prefix]
    assert read_current_version(settings.model_dir) is None


def test_a_pool_with_no_new_rows_is_skipped_and_flush_stays_in_its_pool(
    open_client: OpenClient,
) -> None:
    client = open_client()
    ingest_into(client, H200, synthetic_rows(300, seed=3))
    ingest_into(client, B200, synthetic_rows(300, seed=4))
    assert client.post(f"{H200}/retrain").json()["outcome"] == "ok"
    assert client.post(f"{H200}/retrain").json()["outcome"] == "skipped"
    assert client.post(f"{B200}/retrain").json()["outcome"] == "ok"

    flushed = client.post(f"{H200}/flush", json={"flush_training_data": True}).json()
    assert flushed["ttft_training_samples_flushed"] > 0 and flushed["retrains_cleared"] == 1
    assert stored(client, B200) == 300
    assert client.get(f"{B200}/retrains").json()["retrains"]


def test_bad_rows_of_one_pool_never_reach_another(open_client: OpenClient) -> None:
    client = open_client()
    ingest_into(client, H200, synthetic_rows(50, seed=5))
    bad = [{**r, "actual_ttft_ms": -1.0} for r in synthetic_rows(5, seed=6)]
    mixed = client.post(f"{B200}/add_training_data_bulk", json={"entries": bad + synthetic_rows(3)})
    assert mixed.status_code == 202 and mixed.json()["rejected"] == 5
    assert mixed.json()["errors"][0]["loc"][:3] == ["body", "entries", 0]
    only_bad = client.post(f"{H200}/add_training_data_bulk", json={"entries": bad})
    assert only_bad.status_code == 422
    assert (stored(client, H200), stored(client, B200), stored(client, "")) == (50, 3, 0)


def test_pool_names_are_checked_and_the_limit_answers_409(open_client: OpenClient) -> None:
    client = open_client(max_pools=2)  # the default pool and one more
    for bad in ("Upper", "under_score", "-dash", "a" * 64, "dot.name"):
        reply = client.post(f"/pools/{bad}/add_training_data_bulk", json={"entries": []})
        assert reply.status_code == 422, bad
        assert reply.json()["detail"][0]["loc"] == ["path", "pool"]
    ingest_into(client, H200, synthetic_rows(20, seed=7))
    refused = client.post(f"{B200}/add_training_data_bulk", json={"entries": synthetic_rows(20)})
    assert refused.status_code == 409
    (error,) = refused.json()["detail"]
    assert error["loc"] == ["path", "pool"] and "LATENCY_MAX_POOLS" in error["msg"]
    assert stored(client, B200) == 0
    # Reads of a pool that does not exist answer as a fresh service, and open no pool.
    status = client.get(f"{B200}/data/status").json()
    assert status["model_version"] is None and status["model_ready"] is False
    answer = client.post(f"{B200}/predict", json=prediction_row()).json()
    assert answer["model_version"] == "cold-start-prior"
    assert [p["name"] for p in client.get("/pools").json()["pools"]] == ["default", "h200-llama"]
    # /pools/default is the unprefixed pool.
    ingest_into(client, "/pools/default", synthetic_rows(10, seed=8))
    assert stored(client, "") == 10


def test_metrics_label_named_pools_and_keep_the_default_unlabelled(
    open_client: OpenClient,
) -> None:
    client = open_client()
    ingest_into(client, H200, synthetic_rows(300, seed=9))
    ingest_into(client, "", synthetic_rows(300, seed=10))
    client.post(f"{H200}/retrain")
    client.post("/retrain")
    lines = client.get("/metrics").text.splitlines()
    assert 'latency_retrains_total{pool="h200-llama",status="ok"} 1.0' in lines
    assert 'latency_retrains_total{status="ok"} 1.0' in lines
    assert 'latency_samples_accepted_total{pool="h200-llama"} 300.0' in lines
    # Every line a Prometheus parser reads once: one HELP per family.
    helps = [line for line in lines if line.startswith("# HELP latency_retrains_total ")]
    assert len(helps) == 1

    # llm-d's own lines speak for the pool of the path.
    def legacy_counts(prefix: str) -> int:
        lines = client.get(f"{prefix}/metrics").text.splitlines()
        counted = [line for line in lines if line.startswith("training_samples_count{")]
        return sum(int(float(line.rsplit(" ", 1)[1])) for line in counted)

    h200, default = legacy_counts(H200), legacy_counts("")
    assert h200 > 0 and default > 0
    ingest_into(client, H200, synthetic_rows(100, seed=12))
    assert legacy_counts(H200) > h200 and legacy_counts("") == default


def test_a_scrape_makes_no_query_and_a_read_of_a_new_pool_builds_no_retrainer(
    open_client: OpenClient,
) -> None:
    client = open_client()
    for seed, prefix in enumerate((H200, B200, "")):
        ingest_into(client, prefix, synthetic_rows(50, seed=seed))
    pools: PoolRegistry = app_of(client).state.pools
    engine = pools.default.store.engine
    with statements(engine) as seen:
        lines = client.get("/metrics").text.splitlines()
        listed = client.get("/pools").json()["pools"]
    assert seen == []  # three pools, not a statement
    # Each synthetic row measures one target: the gauges add up to the rows stored.
    gauges = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith("latency_store_samples{")
    }
    assert sum(gauges.values()) == 150
    trained = sum(v for k, v in gauges.items() if 'split="train"' in k)
    assert sum(p["training_samples"] for p in listed) == trained
    # A pool that does not exist is a read-only view: no retrainer, and nothing kept.
    view = pools.resolve("nowhere")
    assert type(view) is PoolView and not hasattr(view, "retrainer")
    assert client.post("/pools/nowhere/retrain").json()["outcome"] == "skipped"
    assert client.get("/pools/nowhere/healthz").json()["status"] == "ok"
    assert pools.get("nowhere") is None and len(pools.runtimes()) == 3


def test_pools_reopen_after_a_restart(open_client: OpenClient, tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = open_client(db_url=db_url, name="first", model_dir=tmp_path / "models")
    ingest_into(first, H200, synthetic_rows(300, seed=11))
    assert first.post(f"{H200}/retrain").json()["outcome"] == "ok"
    version = first.get(f"{H200}/data/status").json()["model_version"]
    first.__exit__(None, None, None)

    again = open_client(db_url=db_url, name="again", model_dir=tmp_path / "models")
    assert [p["name"] for p in again.get("/pools").json()["pools"]] == ["default", "h200-llama"]
    assert again.get(f"{H200}/data/status").json()["model_version"] == version
    assert again.post(f"{H200}/retrain").json()["outcome"] == "skipped"  # nothing new


def test_the_listing_carries_each_pools_live_calibration_when_asked(
    open_client: OpenClient,
) -> None:
    client = open_client()
    ingest_into(client, H200, synthetic_rows(400, seed=1))
    assert client.post(f"{H200}/retrain").json()["outcome"] == "ok"
    ingest_into(client, H200, synthetic_rows(100, seed=2))
    pools: PoolRegistry = app_of(client).state.pools
    runtime = pools.get("h200-llama")
    assert runtime is not None
    runtime.calibrator.tick()  # the leader's step: scores the new rows, writes the file

    listed = {p["name"]: p for p in client.get("/pools?calibration=true").json()["pools"]}
    h200 = listed["h200-llama"]
    # What a mirror would fetch from the pool's own route, and when it was written.
    assert h200["live_calibration"] == client.get(f"{H200}/calibration").json()
    assert h200["calibration_updated_at"] is not None
    assert h200["model_version"] == client.get(f"{H200}/data/status").json()["model_version"]
    # Asked without it (the dashboard, the CLI): the time only, not the document.
    plain = {p["name"]: p for p in client.get("/pools").json()["pools"]}
    assert "live_calibration" not in plain["h200-llama"]
    assert plain["h200-llama"]["calibration_updated_at"] == h200["calibration_updated_at"]
