"""Each defect the fuzzing found, pinned on the real apps: the input, and the answer the
contract (docs/api.md section 2) asks for instead of what the servers gave.

Defects whose fix belongs in files this suite may not change are pinned as strict xfails:
once fixed they pass, and the xfail marker must go (the reason names the fix)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import prediction_row, synthetic_rows
from prediction_server.app import create_app as create_prediction_app
from shared.schemas import COUNT_MAX
from shared.settings import PredictionSettings
from shared.target_space import MAX_MS
from tests.conftest import publish_trained_bundle, training_settings
from training_server.app import create_app as create_training_app

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def prediction(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    model_dir = tmp_path_factory.mktemp("prediction") / "models"
    model_dir.mkdir()
    publish_trained_bundle(model_dir, seed=12)
    app = create_prediction_app(PredictionSettings(model_dir=model_dir))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def training(tmp_path: Path) -> Iterator[TestClient]:
    settings = training_settings(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")
    app = create_training_app(settings, start_loop=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def detail_locations(response: Any) -> list[list[Any]]:
    assert response.status_code == 422, response.text
    return [e["loc"] for e in response.json()["detail"]]


def with_literal(row: dict[str, Any], field: str, literal: str) -> str:
    """`row` as JSON text with `literal` (not always valid JSON) as the value of `field`."""
    return json.dumps({**row, field: "@@"}).replace('"@@"', literal)


# --- the predict routes (prediction_server.routes.predict) ------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("field", ["kv_cache_percentage", "input_token_length"])
def test_non_finite_numbers_answer_422_naming_the_field(
    prediction: TestClient, literal: str, field: str
) -> None:
    """Was 500: Python's JSON parser reads these (1e999 is even valid JSON, read as inf), and
    FastAPI's JSONResponse cannot echo them back in the error."""
    row = with_literal(prediction_row(), field, literal)
    assert detail_locations(prediction.post("/predict", content=row, headers=JSON)) == [
        ["body", field]
    ]
    bulk = prediction.post("/predict/bulk", content=f'{{"requests": {literal}}}', headers=JSON)
    assert detail_locations(bulk) == [["body", "requests"]]
    strict = prediction.post(
        "/predict/bulk/strict", content=f'{{"requests": [{row}]}}', headers=JSON
    )
    assert strict.status_code == 422


def test_a_body_that_is_not_utf8_answers_422(prediction: TestClient) -> None:
    """Was 400 ("There was an error parsing the body"): the contract's malformed body is 422."""
    for path in ("/predict", "/predict/bulk", "/predict/bulk/strict"):
        response = prediction.post(path, content=b'{"requests": "\xff\xfe"}', headers=JSON)
        assert response.status_code == 422, (path, response.text)


def test_bulk_refuses_a_bad_row_holding_any_integer(prediction: TestClient) -> None:
    """Was 500: orjson cannot write integers past 64 bits, and the bad row was echoed (in a
    per-row error, before /predict/bulk validated whole bodies; now in the 422's input)."""
    huge = -(2**63) - 1
    response = prediction.post(
        "/predict/bulk",
        content=json.dumps(
            {"requests": [prediction_row(), {"": huge, "input_token_length": 2**70}]}
        ),
        headers=JSON,
    )
    locations = detail_locations(response)
    assert ["body", "requests", 1, "input_token_length"] in locations
    assert ["body", "requests", 1, "kv_cache_percentage"] in locations  # missing
    assert all(loc[:3] == ["body", "requests", 1] for loc in locations)
    too_big = next(e for e in response.json()["detail"] if e["loc"][-1] == "input_token_length")
    assert too_big["input"] == 2**70  # exact


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_numbers(prediction: TestClient, value: bool) -> None:
    """Was 200 with true taken as 1 (pydantic's lax mode; numpy in the fast decoder)."""
    row = prediction_row(num_request_waiting=value)
    assert detail_locations(prediction.post("/predict", json=row)) == [
        ["body", "num_request_waiting"]
    ]
    assert detail_locations(
        prediction.post("/predict/bulk/strict", json={"requests": [prediction_row(), row]})
    ) == [["body", "requests", 1, "num_request_waiting"]]
    assert detail_locations(prediction.post("/predict/bulk", json={"requests": [row]})) == [
        ["body", "requests", 0, "num_request_waiting"]
    ]


def test_a_list_for_a_number_answers_422_not_500(prediction: TestClient) -> None:
    """Was 500: the fast decoder's numpy table went ragged (ValueError)."""
    row = {**prediction_row(), "input_token_length": [1, 2]}
    assert detail_locations(prediction.post("/predict/bulk/strict", json={"requests": [row]})) == [
        ["body", "requests", 0, "input_token_length"]
    ]


def test_counts_at_the_bound_are_served(prediction: TestClient) -> None:
    row = prediction_row(
        **{
            f: COUNT_MAX
            for f in (
                "input_token_length",
                "num_request_waiting",
                "num_request_running",
                "num_tokens_generated",
                "prefill_tokens_in_flight",
                "decode_tokens_in_flight",
                "encoder_matched_size",
                "encoder_input_size",
            )
        }
    )
    response = prediction.post("/predict/bulk/strict", json={"requests": [row, prediction_row()]})
    assert response.status_code == 200, response.text
    for answer in response.json()["predictions"]:
        assert math.isfinite(answer["ttft_ms"]) and answer["ttft_ms"] >= 0
        assert math.isfinite(answer["tpot_ms"]) and answer["tpot_ms"] >= 0


def test_the_strict_route_documents_its_422(prediction: TestClient) -> None:
    spec = prediction.get("/openapi.json").json()
    assert "422" in spec["paths"]["/predict/bulk/strict"]["post"]["responses"]
    pod_type = spec["components"]["schemas"]["PredictionRequest"]["properties"]["pod_type"]
    assert {"type": "null"} in pod_type["anyOf"]  # the contract: string or null


# --- the training server's own routes ------------------------------------------------------


def test_ingestion_refuses_a_boolean_row_and_keeps_the_rest(training: TestClient) -> None:
    rows = synthetic_rows(3, seed=5)
    rows[1]["num_request_running"] = True
    body = training.post("/add_training_data_bulk", json={"entries": rows}).json()
    assert body["message"] == "Accepted 2 training samples." and body["rejected"] == 1
    assert body["errors"][0]["loc"] == ["body", "entries", 1, "num_request_running"]


def test_flush_takes_only_booleans(training: TestClient) -> None:
    """Was 200 for {"flush_metrics": 0}: on a route that deletes data, strictly booleans."""
    training.post("/add_training_data_bulk", json={"entries": synthetic_rows(5, seed=1)})
    assert detail_locations(training.post("/flush", json={"flush_training_data": 0})) == [
        ["body", "flush_training_data"]
    ]
    assert training.get("/data/status").json()["training_data"]["total_samples"] > 0


def test_ingestion_documents_what_it_accepts(training: TestClient) -> None:
    entries = training.get("/openapi.json").json()["components"]["schemas"]["BulkTrainingEnvelope"][
        "properties"
    ]["entries"]
    assert entries["minItems"] == 1
    assert "actual_ttft_ms" in entries["contains"]["required"]  # at least one valid row


def test_a_retrain_on_absurd_but_valid_actuals_succeeds(training: TestClient) -> None:
    """Was a failed retrain (under -W error) or inf metrics and null predictions: the contract
    bounds latencies only below, so 1e300 ms is a valid row; squares of it overflowed in the
    evaluation, exp() of what the model learned from it overflowed in to_ms."""
    rows = synthetic_rows(400, seed=7)
    for row in rows[:60]:
        field = "actual_ttft_ms" if row["actual_ttft_ms"] > 0 else "actual_tpot_ms"
        row[field] = 1e300
        row["predicted_ttft_ms"] = row["predicted_tpot_ms"] = 1.7e308
    assert training.post("/add_training_data_bulk", json={"entries": rows}).status_code == 202
    assert training.post("/retrain").json() == {"outcome": "ok", "last_error": None}
    for row in (prediction_row(), prediction_row(input_token_length=COUNT_MAX)):
        answer = training.post("/predict", json=row).json()  # the trainer's debugging route
        for key in ("ttft_ms", "tpot_ms"):
            assert math.isfinite(answer[key]) and 0 <= answer[key] <= MAX_MS * math.exp(5)
    retrain = training.get("/retrains").json()["retrains"][0]
    assert all(retrain[k] is not None for k in retrain if k.endswith(("_mae", "_rmse")))


def test_training_routes_answer_422_for_non_finite_numbers(training: TestClient) -> None:
    """Was 500: FastAPI cannot echo NaN (or the inf of 1e999) in its 422 body."""
    row = with_literal(synthetic_rows(1)[0], "kv_cache_percentage", "1e999")
    statuses = [
        training.post(
            "/add_training_data_bulk", content=f'{{"entries": [{row}]}}', headers=JSON
        ).status_code,
        training.post("/flush", content='{"reason": NaN}', headers=JSON).status_code,
        training.post(
            "/prediction_servers/report",
            content=('{"id": "a", "model_version": "v", "is_ready": true, "interval_s": NaN}'),
            headers=JSON,
        ).status_code,
    ]
    assert statuses == [422, 422, 422]


def test_training_routes_answer_422_for_a_body_that_is_not_utf8(training: TestClient) -> None:
    """Was 400; the contract's malformed body is 422."""
    response = training.post("/flush", content=b'{"reason": "\xff"}', headers=JSON)
    assert response.status_code == 422
