"""Training-server ingestion and operations routes, through the real app and its lifespan."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import prediction_row, synthetic_rows
from shared.backends import XGBoostBackend
from shared.features import CARRIED_ONLY, feature_names
from shared.prior import prior_importances
from shared.targets import Target
from tests.training_server.conftest import OpenClient, ingest, train


def totals(client: TestClient) -> dict[str, int]:
    """Counts summed over both splits (the split itself is random)."""
    status = client.get("/data/status").json()
    return {
        k: status["training_data"][k] + status["test_data"][k]
        for k in ("ttft_samples", "tpot_samples", "total_samples")
    }


def metric_value(client: TestClient, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


# ingestion ------------------------------------------------------------------------------
def test_bulk_ingestion_answers_202_with_the_exact_message(client: TestClient) -> None:
    response = client.post("/add_training_data_bulk", json={"entries": synthetic_rows(7)})
    assert response.status_code == 202
    assert response.json() == {"message": "Accepted 7 training samples."}
    assert totals(client)["total_samples"] == 7
    assert metric_value(client, "latency_samples_accepted_total") == 7.0


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("kv_cache_percentage", 1.5, "less_than_equal"),
        ("input_token_length", -1, "greater_than_equal"),
        ("actual_ttft_ms", "fast", "float_parsing"),
        ("actual_tpot_ms", None, "missing"),
    ],
)
def test_one_invalid_row_costs_only_itself(
    client: TestClient, field: str, value: Any, kind: str
) -> None:
    rows = synthetic_rows(5)
    if kind == "missing":
        del rows[3][field]
    else:
        rows[3][field] = value
    body = ingest(client, rows)
    assert body["message"] == "Accepted 4 training samples."
    assert body["rejected"] == 1
    assert [e["loc"] for e in body["errors"]] == [["body", "entries", 3, field]]
    assert body["errors"][0]["type"] == kind
    assert totals(client)["total_samples"] == 4


def test_all_rows_invalid_is_422_naming_the_field(client: TestClient) -> None:
    rows = synthetic_rows(2)
    for row in rows:
        row["prefix_cache_score"] = 2.0
    response = client.post("/add_training_data_bulk", json={"entries": rows})
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["detail"]]
    assert locs == [
        ["body", "entries", 0, "prefix_cache_score"],
        ["body", "entries", 1, "prefix_cache_score"],
    ]
    assert totals(client)["total_samples"] == 0


@pytest.mark.parametrize("body", [{"entries": []}, {}, {"entries": "nope"}])
def test_empty_or_malformed_envelope_is_422(client: TestClient, body: dict[str, Any]) -> None:
    response = client.post("/add_training_data_bulk", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["body", "entries"]


def test_more_rows_than_max_rows_per_call_is_422(open_client: OpenClient) -> None:
    client = open_client(max_rows_per_call=10)
    response = client.post("/add_training_data_bulk", json={"entries": synthetic_rows(11)})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "entries"]
    assert totals(client)["total_samples"] == 0
    assert ingest(client, synthetic_rows(10)) == {"message": "Accepted 10 training samples."}


def test_unknown_fields_any_pod_type_and_go_timestamps_are_accepted(client: TestClient) -> None:
    rows = synthetic_rows(6)
    for row, pod_type in zip(
        rows, ["prefill-decode", "both", None, "", "decode", "GPU-x"], strict=True
    ):
        row["pod_type"] = pod_type
    rows[0]["some_future_field"] = {"nested": True}
    rows[1]["timestamp"] = "2024-05-01T12:34:56.123456789Z"
    rows[2]["timestamp"] = "2024-05-01T12:34:56.987654321+02:00"
    rows[3]["predicted_ttft_ms"] = None
    rows[4]["predicted_tpot_ms"] = 12.5
    assert ingest(client, rows) == {"message": "Accepted 6 training samples."}


def test_zero_actual_does_not_count_for_that_target(client: TestClient) -> None:
    rows = synthetic_rows(3)
    rows[0].update(actual_ttft_ms=120.0, actual_tpot_ms=0.0)
    rows[1].update(actual_ttft_ms=0.0, actual_tpot_ms=9.0)
    rows[2].update(actual_ttft_ms=0.0, actual_tpot_ms=0.0)
    ingest(client, rows)
    assert totals(client) == {"ttft_samples": 1, "tpot_samples": 1, "total_samples": 3}


# status, retrain, history -----------------------------------------------------------------
def test_probes_and_root_before_any_model(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "consecutive_retrain_failures": 0}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "model_ready": False}
    root = client.get("/").json()
    assert "training" in root["service"] and root["model_version"] is None
    assert client.post("/retrain").json() == {"outcome": "skipped", "last_error": None}


def test_ingest_retrain_status_flush_cycle(open_client: OpenClient, db_url: str) -> None:
    client = open_client(db_url=db_url)
    status = client.get("/data/status").json()
    assert (status["model_ready"], status["last_retrain"]) == (False, None)

    status = train(client)
    assert status["model_ready"] is True and status["model_version"]
    for split in ("training_data", "test_data"):
        assert set(status[split]) == {"ttft_samples", "tpot_samples", "total_samples"}
        assert all(type(v) is int for v in status[split].values()), status[split]
    assert totals(client)["total_samples"] == 400
    last = status["last_retrain_detail"]
    assert (last["status"], last["version"]) == ("ok", status["model_version"])
    assert last["started_at"].endswith("Z")
    # llm-d's field is the time alone: when that retrain started (its bundle's created_at).
    assert status["last_retrain"] == last["started_at"]
    assert datetime.fromisoformat(status["last_retrain"]).utcoffset() is not None
    assert last["ttft_mae"] is not None and 0.0 <= last["tpot_coverage"] <= 1.0
    assert client.get("/readyz").json()["model_ready"] is True
    assert client.get("/").json()["model_version"] == status["model_version"]

    flushed = client.post("/flush").json()
    assert flushed["success"] is True and flushed["metrics_cleared"] is True
    assert flushed["retrains_cleared"] == 1
    n = {
        f"{t}_{s}": status[k][f"{t}_samples"]
        for t in ("ttft", "tpot")
        for s, k in (("training", "training_data"), ("test", "test_data"))
    }
    assert flushed["message"] == (  # llm-d's wording, which its tooling matches
        f"Successfully flushed: {n['ttft_training']} TTFT and {n['tpot_training']} TPOT "
        f"training samples, {n['ttft_test']} TTFT and {n['tpot_test']} TPOT test samples, "
        "all metric scores"
    )
    for split, label in (("training_data", "training"), ("test_data", "test")):
        for t in ("ttft", "tpot"):
            assert flushed[f"{t}_{label}_samples_flushed"] == status[split][f"{t}_samples"]
    after = client.get("/data/status").json()
    assert totals(client) == {"ttft_samples": 0, "tpot_samples": 0, "total_samples": 0}
    assert after["last_retrain"] is None and after["last_retrain_detail"] is None
    assert client.get("/retrains").json()["retrains"] == []


def test_flush_with_body_keeps_what_it_is_told_to_keep(trained: TestClient) -> None:
    before = trained.get("/data/status").json()
    body = {"flush_training_data": False, "flush_metrics": False, "reason": "test rows only"}
    flushed = trained.post("/flush", json=body).json()
    assert flushed["reason"] == "test rows only" and flushed["metrics_cleared"] is False
    assert (
        flushed["message"].startswith("Successfully flushed: ")
        and "training" not in flushed["message"]
        and "metric" not in flushed["message"]
    )
    nothing = {"flush_training_data": False, "flush_test_data": False, "flush_metrics": False}
    assert trained.post("/flush", json=nothing).json()["message"] == "No data flushed"
    assert flushed["ttft_training_samples_flushed"] == 0
    assert flushed["ttft_test_samples_flushed"] == before["test_data"]["ttft_samples"]
    after = trained.get("/data/status").json()
    assert after["training_data"] == before["training_data"]
    assert after["test_data"]["total_samples"] == 0
    assert after["last_retrain"] == before["last_retrain"] is not None
    assert after["last_retrain_detail"] == before["last_retrain_detail"]
    assert len(trained.get("/retrains").json()["retrains"]) == 1


def test_retrain_history_newest_first_with_limit_and_offset(trained: TestClient) -> None:
    first = trained.get("/data/status").json()["model_version"]
    second = train(trained, n=50, seed=1)["model_version"]
    assert second != first
    history = trained.get("/retrains").json()
    assert [r["version"] for r in history["retrains"]] == [second, first]
    assert (history["limit"], history["offset"]) == (50, 0)
    page = trained.get("/retrains", params={"limit": 1, "offset": 1}).json()
    assert [r["version"] for r in page["retrains"]] == [first]
    oldest = page["retrains"][0]
    assert oldest["ttft_test_samples"] > 0
    # per retrain: what calibration did, the live score (no served p90s sent: none), regimes
    assert {
        "ttft_raw_coverage",
        "tpot_calibration_log_offset",
        "ttft_live_rows",
        "tpot_live_coverage",
        "window_limit",
    } <= set(oldest)
    assert oldest["ttft_live_rows"] == 0 and oldest["tpot_live_coverage"] is None
    ttft_regimes = oldest["regimes"]["ttft"]
    split = [ttft_regimes.get(k, {"n": 0})["n"] for k in ("queued", "not_queued")]
    assert sum(split) > 0  # every scored row is queued or not (which, the random split says)
    assert trained.get("/retrains", params={"limit": 0}).status_code == 422


def test_metrics_lines_all_end_in_a_float(client: TestClient) -> None:
    ingest(client, synthetic_rows(5))
    before = client.get("/metrics")
    assert before.headers["content-type"].startswith("text/plain")
    assert "ttft_mae{}" not in before.text
    train(client)
    text = client.get("/metrics").text
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    for line in lines:
        float(line.rsplit(" ", 1)[1])
    assert "model_quantile{} 0.9" in lines
    assert 'model_type{type="xgboost"} 1' in lines
    assert 'objective_type{type="quantile"} 1' in lines
    for name in (
        "ttft_mae{}",
        "tpot_rmse{}",
        "ttft_coverage_percent{}",
        "tpot_quantile_loss{}",
        'ttft_importance{feature="input_token_length"}',
        'training_samples_count{model="ttft",split="train"}',
    ):
        assert any(line.startswith(name + " ") for line in lines), name
    assert metric_value(client, "latency_samples_accepted_total") == 405.0
    assert metric_value(client, "latency_retrain_duration_seconds_count") == 1.0
    assert metric_value(client, 'latency_retrains_total{status="ok"}') == 1.0


def metric_lines(client: TestClient) -> list[str]:
    """The /metrics sample lines; each must end in a float (the EPP's client drops the whole
    body otherwise)."""
    text = client.get("/metrics").text
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    for line in lines:
        float(line.rsplit(" ", 1)[1])
    return lines


def importances(lines: list[str], target: str) -> dict[str, float]:
    prefix = f'{target}_importance{{feature="'
    return {
        line[len(prefix) : line.index('"}')]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(prefix)
    }


def test_metrics_from_the_first_second_carry_the_priors_importances(client: TestClient) -> None:
    """Before any sample: the legacy lines llm-d tooling checks, and importances that are the
    cold-start prior's documented weights (shared.prior), 0 for a column it has no term in."""
    lines = metric_lines(client)
    for line in ("ensemble_active{} 0", "ensemble_mode{} 0", 'model_type{type="xgboost"} 1'):
        assert line in lines
    assert any(line.startswith("training_samples_count{") for line in lines)
    ttft, tpot = importances(lines, "ttft"), importances(lines, "tpot")
    assert ttft == {
        **dict.fromkeys(feature_names(Target.TTFT), 0.0),
        "effective_input_tokens": 0.1,
        "prefill_tokens_in_flight": 0.1,
        "num_request_waiting": 200.0,
    }
    assert ttft["prefix_cache_score"] == 0.0  # it acts through effective_input_tokens only
    assert tpot == {
        **dict.fromkeys(feature_names(Target.TPOT), 0.0),
        "num_request_running": 0.5,
        "kv_cache_percentage": 20.0,
    }


def test_metrics_importances_follow_the_trees_once_trained(client: TestClient) -> None:
    train(client)
    lines = metric_lines(client)
    ttft = importances(lines, "ttft")
    # The rows carry no pod_class, so the bundle does not list its code
    assert list(ttft) == [n for n in feature_names(Target.TTFT) if n not in CARRIED_ONLY]
    bundle = client.app.state.pools.default.slot.published  # type: ignore[attr-defined]
    want = XGBoostBackend().importances(bundle.models[Target.TTFT], bundle.features[Target.TTFT])
    assert ttft == pytest.approx(want)
    assert ttft != prior_importances(Target.TTFT, feature_names(Target.TTFT))
    assert ttft["effective_input_tokens"] > 0  # the synthetic TTFT grows with it


def test_data_status_counts_the_queue_split_from_the_store(
    open_client: OpenClient, db_url: str
) -> None:
    """llm-d's `ensemble` section: no ensemble is served, the counts are the store's
    training rows per target, waiting == 0 against waiting > 0."""
    client = open_client(db_url=db_url, test_train_ratio=0.0)
    empty = client.get("/data/status").json()["ensemble"]
    assert empty == {
        "ensemble_mode": False,
        "ensemble_active": False,
        "min_samples_for_split": None,
        "ttft_noqueue_samples": 0,
        "ttft_queued_samples": 0,
        "tpot_noqueue_samples": 0,
        "tpot_queued_samples": 0,
    }
    rows = synthetic_rows(300, seed=4)
    ingest(client, rows)
    ensemble = client.get("/data/status").json()["ensemble"]
    for target in ("ttft", "tpot"):
        measured = [r for r in rows if r[f"actual_{target}_ms"] > 0]
        queued = sum(r["num_request_waiting"] > 0 for r in measured)
        assert ensemble[f"{target}_queued_samples"] == queued > 0
        assert ensemble[f"{target}_noqueue_samples"] == len(measured) - queued > 0
        assert type(ensemble[f"{target}_queued_samples"]) is int


def test_training_server_predict_reports_the_model_version(client: TestClient) -> None:
    cold = client.post("/predict", json=prediction_row())
    assert cold.status_code == 200
    assert cold.json()["model_version"] == "cold-start-prior"
    version = train(client)["model_version"]
    answer = client.post("/predict", json=prediction_row()).json()
    assert answer["model_version"] == version
    assert answer["ttft_ms"] >= 0 and answer["tpot_ms"] >= 0
    assert client.post("/predict", json=prediction_row(kv_cache_percentage=3)).status_code == 422


def test_count_beyond_the_store_range_costs_only_its_row(
    open_client: OpenClient, db_url: str
) -> None:
    client = open_client(db_url=db_url)
    rows = synthetic_rows(5)
    rows[2]["input_token_length"] = 2**63
    response = client.post("/add_training_data_bulk", json={"entries": rows})
    assert response.status_code == 202, response.text
    assert response.json()["rejected"] == 1
    assert totals(client)["total_samples"] == 4
