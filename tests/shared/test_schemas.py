"""Wire schemas (spec section 2): what a prediction row and a training entry accept and refuse."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from devkit.synthetic import prediction_row
from shared.schemas import PredictionRequest, TrainingEntry

REQUIRED_PREDICTION_FIELDS = (
    "kv_cache_percentage",
    "input_token_length",
    "num_request_waiting",
    "num_request_running",
    "num_tokens_generated",
    "prefix_cache_score",
)
OPTIONAL_COUNTS = (
    "prefill_tokens_in_flight",
    "decode_tokens_in_flight",
    "encoder_matched_size",
    "encoder_input_size",
)


def training_row(**overrides: Any) -> dict[str, Any]:
    row = {**prediction_row(), "actual_ttft_ms": 120.5, "actual_tpot_ms": 0.0}
    row.update(overrides)
    return row


# a training entry is a prediction row plus its actuals, so both parse as a PredictionRequest
MODELS: dict[str, tuple[type[PredictionRequest], Callable[..., dict[str, Any]]]] = {
    "prediction": (PredictionRequest, prediction_row),
    "training": (TrainingEntry, training_row),
}


def error_locs(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[Any, ...]]:
    return [tuple(e["loc"]) for e in exc.value.errors()]


@pytest.mark.parametrize("kind", MODELS)
def test_unknown_fields_are_ignored(kind: str) -> None:
    model, make = MODELS[kind]
    parsed = model.model_validate(make(future_field=7, another={"nested": True}))
    dumped = parsed.model_dump()
    assert "future_field" not in dumped and "another" not in dumped
    assert dumped["input_token_length"] == 500
    assert dumped["kv_cache_percentage"] == 0.3


def test_optional_fields_default_to_zero_and_empty_pod_type() -> None:
    row = {name: prediction_row()[name] for name in REQUIRED_PREDICTION_FIELDS}
    parsed = PredictionRequest.model_validate(row)
    assert parsed.pod_type == ""
    assert [getattr(parsed, name) for name in OPTIONAL_COUNTS] == [0, 0, 0, 0]


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("prefill-decode", "prefill-decode"),
        ("both", "both"),
        ("weird", "weird"),
        ("prefill", "prefill"),
        ("decode", "decode"),
        ("", ""),
        (None, ""),
    ],
)
def test_any_pod_type_string_is_accepted_and_null_is_empty(
    kind: str, sent: str | None, kept: str
) -> None:
    model, make = MODELS[kind]
    assert model.model_validate(make(pod_type=sent)).pod_type == kept


@pytest.mark.parametrize(
    "stamp",
    ["2026-12-02T17:05:18.123456789Z", "2026-12-02T17:05:18.123456789+00:00"],
)
def test_go_nanosecond_timestamps_are_accepted(stamp: str) -> None:
    entry = TrainingEntry.model_validate(training_row(timestamp=stamp))
    assert entry.timestamp is not None
    assert entry.timestamp.astimezone(UTC).replace(microsecond=0) == datetime(
        2026, 12, 2, 17, 5, 18, tzinfo=UTC
    )
    assert entry.timestamp.microsecond == 123456
    # The same through the JSON parser the routes use.
    body = TrainingEntry.model_validate_json(json.dumps(training_row(timestamp=stamp)))
    assert body.timestamp == entry.timestamp


def test_training_entry_optional_predictions_accept_null() -> None:
    entry = TrainingEntry.model_validate(
        training_row(predicted_ttft_ms=None, predicted_tpot_ms=12.5)
    )
    assert entry.predicted_ttft_ms is None
    assert entry.predicted_tpot_ms == 12.5
    assert entry.actual_ttft_ms == 120.5 and entry.actual_tpot_ms == 0.0


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        ("prediction", "kv_cache_percentage", 1.5),
        ("prediction", "kv_cache_percentage", -0.01),
        ("prediction", "kv_cache_percentage", math.nan),
        ("prediction", "prefix_cache_score", 1.0001),
        ("prediction", "input_token_length", -1),
        ("prediction", "num_request_waiting", 1.5),
        ("prediction", "num_request_running", "abc"),
        ("prediction", "num_tokens_generated", None),
        ("prediction", "prefill_tokens_in_flight", -5),
        ("prediction", "decode_tokens_in_flight", 0.5),
        ("prediction", "encoder_input_size", -1),
        ("prediction", "pod_type", 5),
        ("training", "actual_ttft_ms", math.inf),
        ("training", "actual_tpot_ms", -1.0),
        ("training", "actual_ttft_ms", math.nan),
        ("training", "predicted_ttft_ms", math.inf),
        ("training", "predicted_tpot_ms", -0.5),
        ("training", "timestamp", "not a time"),
        ("training", "kv_cache_percentage", 1.5),
        ("training", "input_token_length", 2.5),
    ],
)
def test_bad_value_raises_naming_only_that_field(kind: str, field: str, value: Any) -> None:
    model, make = MODELS[kind]
    with pytest.raises(ValidationError) as exc:
        model.model_validate(make(**{field: value}))
    assert error_locs(exc) == [(field,)]


@pytest.mark.parametrize(
    ("kind", "field"),
    [("prediction", f) for f in REQUIRED_PREDICTION_FIELDS]
    + [("training", f) for f in (*REQUIRED_PREDICTION_FIELDS, "actual_ttft_ms", "actual_tpot_ms")],
)
def test_missing_required_field_is_named(kind: str, field: str) -> None:
    model, make = MODELS[kind]
    row = make()
    del row[field]
    with pytest.raises(ValidationError) as exc:
        model.model_validate(row)
    errors = exc.value.errors()
    assert [(tuple(e["loc"]), e["type"]) for e in errors] == [((field,), "missing")]


@pytest.mark.parametrize("kind", MODELS)
def test_boundary_values_are_valid(kind: str) -> None:
    model, make = MODELS[kind]
    low = model.model_validate(
        make(
            kv_cache_percentage=0.0,
            prefix_cache_score=0.0,
            input_token_length=0,
            num_request_running=0,
        )
    )
    high = model.model_validate(make(kv_cache_percentage=1.0, prefix_cache_score=1.0))
    assert (low.kv_cache_percentage, low.prefix_cache_score, low.input_token_length) == (0, 0, 0)
    assert (high.kv_cache_percentage, high.prefix_cache_score) == (1.0, 1.0)
