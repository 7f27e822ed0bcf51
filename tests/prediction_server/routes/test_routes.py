"""Prediction routes of the contract (spec section 3) on a real app with real models."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from devkit.synthetic import prediction_row
from shared.artifact import Manifest, bundle_dir_for, new_version, write_bundle
from shared.decoding import decode_prediction_rows
from shared.features import build_matrix
from shared.predictor import load_current_bundle
from shared.settings import ModelType, ObjectiveType
from shared.targets import Target
from tests.conftest import publish_trained_bundle
from tests.polling import eventually
from tests.prediction_server.helpers import (
    WAIT_S,
    epp_rows,
    metric_value,
    running_app,
    served_version,
    strict,
)

PREDICTION_FIELDS = {
    "ttft_ms",
    "tpot_ms",
    "predicted_at",
    "model_type",
    "objective_type",
    "quantile",
    "last_model_load",
    "model_version",
}


def is_rfc3339_utc(value: str) -> bool:
    return value.endswith("Z") and datetime.fromisoformat(value).utcoffset() is not None


@pytest.fixture
def published(model_dir: Path) -> Manifest:
    return publish_trained_bundle(model_dir, seed=5)


def test_cold_start_serves_the_prior(model_dir: Path) -> None:
    with running_app(model_dir) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert client.get("/healthz").json() == {"status": "ok"}
        status = client.get("/status").json()
        assert status["model_version"] == "cold-start-prior"
        assert status["models_exist"] == {"ttft_model": False, "tpot_model": False}
        assert status["is_ready"] is True and status["last_model_load"] is None
        assert (status["model_type"], status["objective_type"], status["quantile"]) == (
            "xgboost",
            "quantile",
            0.9,
        )
        short, long = strict(
            client, [prediction_row(input_token_length=10), prediction_row(input_token_length=5000)]
        )["predictions"]
    assert 0 < short["ttft_ms"] < long["ttft_ms"]
    assert short["tpot_ms"] > 0 and long["tpot_ms"] > 0
    # The documented prior: 50 + 0.1 * effective tokens; 10 + 0.5 * running + 20 * kv.
    assert long["ttft_ms"] == pytest.approx(50 + 0.1 * 5000)
    assert long["tpot_ms"] == pytest.approx(10 + 0.5 * 4 + 20 * 0.3)
    assert long["model_version"] == "cold-start-prior" and long["last_model_load"] is None


def test_bundle_published_before_start_is_served(model_dir: Path, published: Manifest) -> None:
    with running_app(model_dir) as client:
        status = client.get("/status").json()
        root = client.get("/").json()
    assert status["model_version"] == root["model_version"] == published.version
    assert status["models_exist"] == {"ttft_model": True, "tpot_model": True}
    assert status["cold_start"] is False and is_rfc3339_utc(status["last_model_load"])


def test_strict_predictions_follow_input_order(model_dir: Path, published: Manifest) -> None:
    rows = epp_rows(12, seed=21)
    with running_app(model_dir) as client:
        body = strict(client, rows)
        singles = [client.post("/predict", json=row).json() for row in rows]
    assert (body["total_requests"], body["successful_predictions"], body["failed_predictions"]) == (
        12,
        12,
        0,
    )
    assert isinstance(body["processing_time_ms"], float) and body["processing_time_ms"] >= 0
    assert body["model_version"] == published.version
    predictions = body["predictions"]
    assert len(predictions) == len(rows)
    for got, single in zip(predictions, singles, strict=True):
        assert set(got) >= PREDICTION_FIELDS
        assert got["ttft_ms"] >= 0 and got["tpot_ms"] >= 0
        assert got["ttft_ms"] == pytest.approx(single["ttft_ms"], rel=1e-9)
        assert got["tpot_ms"] == pytest.approx(single["tpot_ms"], rel=1e-9)
        assert is_rfc3339_utc(got["predicted_at"]) and is_rfc3339_utc(got["last_model_load"])
        assert (got["model_type"], got["objective_type"], got["quantile"]) == (
            "xgboost",
            "quantile",
            0.9,
        )
        assert got["model_version"] == published.version
    assert len({p["ttft_ms"] for p in predictions}) > 1  # a real model, varied rows


def test_server_predicts_like_the_library(
    model_dir: Path, model_choice: tuple[ModelType, ObjectiveType]
) -> None:
    model_type, objective = model_choice
    publish_trained_bundle(model_dir, model_type, objective, seed=8)
    rows = epp_rows(40, seed=9)
    want = load_current_bundle(model_dir).predict(decode_prediction_rows(rows))  # type: ignore
    with running_app(model_dir, model_type=ModelType.XGBOOST) as client:
        predictions = strict(client, rows)["predictions"]
    assert {(p["model_type"], p["objective_type"]) for p in predictions} == {
        (model_type.value, objective.value)
    }
    np.testing.assert_allclose([p["ttft_ms"] for p in predictions], want[Target.TTFT], rtol=1e-4)
    np.testing.assert_allclose([p["tpot_ms"] for p in predictions], want[Target.TPOT], rtol=1e-4)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kv_cache_percentage", 1.5),
        ("input_token_length", -1),
        ("num_request_waiting", "abc"),
        ("num_request_running", None),
        ("prefix_cache_score", 2),
        ("num_tokens_generated", 1.5),
        ("prefill_tokens_in_flight", -3),
        ("input_token_length", "1e3"),
    ],
)
def test_strict_bad_row_is_422_naming_index_and_field(
    model_dir: Path, field: str, value: Any
) -> None:
    rows = [prediction_row(), prediction_row(**{field: value}), prediction_row()]
    with running_app(model_dir) as client:
        response = client.post("/predict/bulk/strict", json={"requests": rows})
        single = client.post("/predict", json=rows[1])
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "requests", 1, field]]
    assert single.status_code == 422
    assert [e["loc"] for e in single.json()["detail"]] == [["body", field]]


def test_strict_missing_field_is_named(model_dir: Path) -> None:
    row = prediction_row()
    del row["prefix_cache_score"]
    with running_app(model_dir) as client:
        response = client.post("/predict/bulk/strict", json={"requests": [prediction_row(), row]})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert [(e["loc"], e["type"]) for e in detail] == [
        (["body", "requests", 1, "prefix_cache_score"], "missing")
    ]


@pytest.mark.parametrize(
    "body",
    [
        b'{"requests": []}',
        b"{}",
        b'{"rows": [{}]}',
        b'{"requests": {"a": 1}}',
        b"[]",
        b'{"requests": [',
        b"not json",
        b"",
    ],
)
def test_strict_bad_envelope_is_422(model_dir: Path, body: bytes) -> None:
    with running_app(model_dir) as client:
        response = client.post(
            "/predict/bulk/strict", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][0] == "body"


@pytest.mark.parametrize("route", ["/predict/bulk/strict", "/predict/bulk"])
def test_more_rows_than_the_limit_is_422(model_dir: Path, route: str) -> None:
    with running_app(model_dir, max_rows_per_call=5) as client:
        over = client.post(route, json={"requests": [prediction_row()] * 6})
        at_limit = client.post(route, json={"requests": [prediction_row()] * 5})
        empty = client.post(route, json={"requests": []})
    assert over.status_code == 422
    assert over.json()["detail"][0]["loc"] == ["body", "requests"]
    assert at_limit.status_code == 200 and len(at_limit.json()["predictions"]) == 5
    assert empty.status_code == 422


@pytest.mark.parametrize("pod_type", ["prefill-decode", "both", None, "prefill", "decode"])
def test_unknown_fields_and_raw_pod_types_are_accepted(model_dir: Path, pod_type: Any) -> None:
    row = {**prediction_row(pod_type=pod_type), "future_field": {"x": 1}, "request_id": "abc"}
    with running_app(model_dir) as client:
        bulk = strict(client, [row])
        single = client.post("/predict", json=row)
    assert single.status_code == 200
    assert bulk["predictions"][0]["ttft_ms"] == pytest.approx(single.json()["ttft_ms"])


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("prefix_cache_score", None, "missing"),
        ("num_request_waiting", "abc", "int_parsing"),
        ("num_request_running", True, "number_type"),
        ("kv_cache_percentage", 7, "less_than_equal"),
    ],
)
def test_bulk_validates_the_whole_body_first(
    model_dir: Path, published: Manifest, field: str, value: Any, kind: str
) -> None:
    """As in the llm-d service: one bad row (a missing field, a wrong type, out of range)
    answers 422 naming it, and no row is answered."""
    rows = epp_rows(3, seed=30)
    bad = {**rows[1], field: value}
    if value is None:
        del bad[field]
    with running_app(model_dir) as client:
        response = client.post("/predict/bulk", json={"requests": [rows[0], bad, rows[2]]})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert [(e["loc"], e["type"]) for e in detail] == [(["body", "requests", 1, field], kind)]


def test_bulk_answers_every_valid_row_as_strict_does(model_dir: Path, published: Manifest) -> None:
    rows = epp_rows(5, seed=31)
    with running_app(model_dir) as client:
        body = client.post("/predict/bulk", json={"requests": rows}).json()
        reference = strict(client, rows)["predictions"]
    assert (body["total_requests"], body["successful_predictions"], body["failed_predictions"]) == (
        5,
        5,
        0,
    )
    assert body["errors"] == [] and body["model_version"] == published.version
    for got, want in zip(body["predictions"], reference, strict=True):
        assert set(got) >= PREDICTION_FIELDS
        assert got["ttft_ms"] == pytest.approx(want["ttft_ms"], rel=1e-9)
        assert got["tpot_ms"] == pytest.approx(want["tpot_ms"], rel=1e-9)


@pytest.mark.parametrize("n_estimators", [0, 20])
def test_bulk_answers_count_each_models_splits(model_dir: Path, n_estimators: int) -> None:
    # Ours: a picker ranks pods by its own counts while a model without splits answers
    # (latency_client's latency-first warm-up); the prior has none either.
    rows = epp_rows(3, seed=41)
    splits = ("ttft_model_splits", "tpot_model_splits")
    with running_app(model_dir) as client:
        prior = strict(client, rows)
    assert [prior[k] for k in splits] == [0, 0]
    publish_trained_bundle(model_dir, seed=5, n_estimators=n_estimators)
    with running_app(model_dir) as client:
        strict_body = strict(client, rows)
        bulk = client.post("/predict/bulk", json={"requests": rows}).json()
    for body in (strict_body, bulk):
        counts = [body[k] for k in splits]
        assert all(isinstance(c, int) for c in counts)
        assert counts == [0, 0] if n_estimators == 0 else min(counts) >= n_estimators


def publish_damaged_ttft(model_dir: Path, published: Manifest, row: dict[str, Any]) -> str:
    """The published bundle again, as a new version whose TTFT model answers NaN in the leaf
    of its first tree that `row` reaches (a real model, damaged; checksums consistent)."""
    import xgboost as xgb

    folder = bundle_dir_for(model_dir, published.version)
    entry = published.targets[Target.TTFT]
    booster = xgb.Booster(model_file=str(folder / str(entry.file)))
    matrix = build_matrix(decode_prediction_rows([row]), entry.features)
    leaf = int(
        booster.predict(xgb.DMatrix(matrix, feature_names=entry.features), pred_leaf=True)[0][0]
    )
    raw = json.loads(booster.save_raw("json"))
    tree = raw["learner"]["gradient_booster"]["model"]["trees"][0]
    tree["split_conditions"][leaf] = tree["base_weights"][leaf] = float("nan")
    damaged = xgb.Booster()
    damaged.load_model(bytearray(json.dumps(raw).encode()))
    tpot = xgb.Booster(model_file=str(folder / str(published.targets[Target.TPOT].file)))
    manifest = published.model_copy(deep=True, update={"version": new_version()})
    write_bundle(model_dir, manifest, {Target.TTFT: damaged, Target.TPOT: tpot})
    return manifest.version


def test_bulk_lists_the_valid_rows_whose_prediction_failed(
    model_dir: Path, published: Manifest
) -> None:
    """`errors` is for rows that are valid but fail in prediction: here a damaged model
    answers NaN for some; those rows are null, listed with why, and the rest answered."""
    rows = epp_rows(40, seed=32)
    version = publish_damaged_ttft(model_dir, published, rows[0])
    with running_app(model_dir) as client:
        assert served_version(client) == version
        body = client.post("/predict/bulk", json={"requests": rows}).json()
    failed = {e["index"] for e in body["errors"]}
    assert 0 in failed and len(failed) < len(rows)
    assert (body["successful_predictions"], body["failed_predictions"]) == (
        len(rows) - len(failed),
        len(failed),
    )
    for error in body["errors"]:
        assert error["error"] == "ttft prediction is not a finite number"
        assert body["predictions"][error["index"]] is None
        sent = rows[error["index"]]
        assert {k: error["request"][k] for k in sent} == sent  # the row, as validated
    for index, answer in enumerate(body["predictions"]):
        if index not in failed:
            assert answer["ttft_ms"] >= 0 and answer["model_version"] == version


def test_status_says_no_queue_gated_ensemble_is_served(model_dir: Path) -> None:
    with running_app(model_dir) as client:
        cold = client.get("/status").json()
        publish_trained_bundle(model_dir, seed=6)
        eventually(
            lambda: not client.get("/status").json()["cold_start"],
            WAIT_S,
            "the trained bundle served",
        )
        trained = client.get("/status").json()
    assert cold["ensemble_active"] is False and trained["ensemble_active"] is False


def test_metrics_count_predicted_rows(model_dir: Path) -> None:
    with running_app(model_dir) as client:
        strict(client, [prediction_row()] * 3)
        strict(client, [prediction_row()] * 4)
        client.post("/predict", json=prediction_row())
        text = client.get("/metrics").text
        assert metric_value(client, 'latency_predicted_rows_total{route="strict"}') == 7.0
        assert metric_value(client, 'latency_predicted_rows_total{route="predict"}') == 1.0
    assert 'latency_predict_duration_seconds_bucket{le="+Inf",route="strict"} 2.0' in text
    assert 'latency_predict_duration_seconds_count{route="predict"} 1.0' in text
