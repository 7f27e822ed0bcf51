"""The one feature definition (spec section 5) and the fast columnar decoder of prediction rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from devkit.synthetic import prediction_row, synthetic_rows
from shared.decoding import decode_prediction_rows
from shared.features import (
    CODE_COLUMNS,
    FEATURES,
    NUMERIC_FIELDS,
    build_matrix,
    columns_from_dicts,
    feature_names,
    pod_type_code,
)
from shared.schemas import PredictionRequest
from shared.targets import TARGETS, Target

ROWS = TypeAdapter(list[PredictionRequest])

ROW_A = {
    "kv_cache_percentage": 0.25,
    "input_token_length": 1000,
    "num_request_waiting": 2,
    "num_request_running": 3,
    "num_tokens_generated": 7,
    "prefix_cache_score": 0.5,
    "pod_type": "prefill",
    "prefill_tokens_in_flight": 100,
    "decode_tokens_in_flight": 9,
    "encoder_matched_size": 4,
    "encoder_input_size": 8,
}
ROW_B = {
    "kv_cache_percentage": 1.0,
    "input_token_length": 10,
    "num_request_waiting": 0,
    "num_request_running": 0,
    "num_tokens_generated": 0,
    "prefix_cache_score": 1.0,
    "pod_type": "decode",
}
# Hand-computed: is_queued, effective_input_tokens = (1 - prefix) * len,
# prefill_score_bucket = min(floor(prefix * 4), 3), pod_type_code prefill=1 decode=2.
EXPECTED = {
    "is_queued": [1.0, 0.0],
    "kv_cache_percentage": [0.25, 1.0],
    "input_token_length": [1000.0, 10.0],
    "num_request_waiting": [2.0, 0.0],
    "num_request_running": [3.0, 0.0],
    "num_tokens_generated": [7.0, 0.0],
    "prefix_cache_score": [0.5, 1.0],
    "prefill_tokens_in_flight": [100.0, 0.0],
    "decode_tokens_in_flight": [9.0, 0.0],
    "encoder_matched_size": [4.0, 0.0],
    "encoder_input_size": [8.0, 0.0],
    "effective_input_tokens": [500.0, 0.0],
    "prefill_score_bucket": [2.0, 3.0],
    "pod_type_code": [1.0, 2.0],
}


def prediction_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """Synthetic rows as the EPP sends them: no actual_* fields."""
    return [
        {k: v for k, v in r.items() if not k.startswith("actual_")}
        for r in synthetic_rows(n, seed=seed)
    ]


def pydantic_columns(rows: list[Any]) -> dict[str, np.ndarray]:
    return columns_from_dicts([r.model_dump() for r in ROWS.validate_python(rows)])


def assert_same_columns(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want) == {*NUMERIC_FIELDS, *CODE_COLUMNS}
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_build_matrix_matches_hand_computed_values() -> None:
    names = list(EXPECTED)
    matrix = build_matrix(columns_from_dicts([ROW_A, ROW_B]), names)
    assert matrix.dtype == np.float32
    assert matrix.shape == (2, len(names))
    np.testing.assert_array_equal(
        matrix, np.array([EXPECTED[n] for n in names], dtype=np.float32).T
    )


@pytest.mark.parametrize(
    ("prefix", "bucket"),
    [
        (0.0, 0),
        (0.24, 0),
        (0.25, 1),
        (0.49, 1),
        (0.5, 2),
        (0.74, 2),
        (0.75, 3),
        (0.99, 3),
        (1.0, 3),
    ],
)
def test_prefill_score_bucket(prefix: float, bucket: int) -> None:
    columns = columns_from_dicts([prediction_row(prefix_cache_score=prefix)])
    assert build_matrix(columns, ["prefill_score_bucket"])[0, 0] == bucket


@pytest.mark.parametrize(
    ("pod_type", "code"),
    [
        ("prefill", 1.0),
        ("decode", 2.0),
        ("", 0.0),
        (None, 0.0),
        ("both", 0.0),
        ("prefill-decode", 0.0),
        ("weird", 0.0),
    ],
)
def test_pod_type_code(pod_type: str | None, code: float) -> None:
    assert pod_type_code(pod_type) == code
    columns = decode_prediction_rows([prediction_row(pod_type=pod_type)])
    assert build_matrix(columns, ["pod_type_code"])[0, 0] == code


def test_feature_names_cover_the_spec_and_honour_switches() -> None:
    ttft, tpot = feature_names(Target.TTFT), feature_names(Target.TPOT)
    for name in (
        "is_queued",
        "kv_cache_percentage",
        "input_token_length",
        "num_request_waiting",
        "num_request_running",
        "prefill_tokens_in_flight",
        "encoder_matched_size",
        "encoder_input_size",
        "prefix_cache_score",
        "effective_input_tokens",
        "prefill_score_bucket",
        "pod_type_code",
    ):
        assert name in ttft
    for name in (
        "is_queued",
        "kv_cache_percentage",
        "input_token_length",
        "num_request_waiting",
        "num_request_running",
        "prefill_tokens_in_flight",
        "pod_type_code",
    ):
        assert name in tpot
    assert all(name in FEATURES for name in (*ttft, *tpot))
    assert len(set(ttft)) == len(ttft) and len(set(tpot)) == len(tpot)

    for target in TARGETS:
        full = feature_names(target)
        no_tif = feature_names(target, token_in_flight=False)
        no_enc = feature_names(target, encoder=False)
        assert "prefill_tokens_in_flight" not in no_tif
        assert "decode_tokens_in_flight" not in no_tif
        assert no_tif == tuple(n for n in full if n != "prefill_tokens_in_flight")
        assert not {"encoder_matched_size", "encoder_input_size"} & set(no_enc)
        assert no_enc == tuple(n for n in full if not n.startswith("encoder_"))
    assert len(feature_names(Target.TTFT, encoder=False)) == len(ttft) - 2


def test_build_matrix_unknown_name_raises() -> None:
    with pytest.raises(KeyError):
        build_matrix(columns_from_dicts([ROW_A]), ["is_queued", "no_such_feature"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_decoder_equals_pydantic_on_valid_rows(seed: int) -> None:
    rows = prediction_rows(64, seed)
    assert {r["pod_type"] for r in rows} >= {"", "prefill", "decode", "both"}
    assert_same_columns(decode_prediction_rows(rows), pydantic_columns(rows))


def test_fast_decoder_fills_optional_defaults_like_pydantic() -> None:
    rows = [dict(ROW_B), {**ROW_B, "pod_type": None}]
    got = decode_prediction_rows(rows)
    assert_same_columns(got, pydantic_columns(rows))
    np.testing.assert_array_equal(got["prefill_tokens_in_flight"], [0.0, 0.0])
    np.testing.assert_array_equal(got["pod_type_code"], [2.0, 0.0])


@pytest.mark.parametrize(
    ("field", "lax", "value"),
    [
        ("input_token_length", "5", 5.0),
        ("num_request_running", 5.0, 5.0),
        ("kv_cache_percentage", "0.5", 0.5),
        ("prefill_tokens_in_flight", "12", 12.0),
    ],
)
def test_lax_valid_values_decode_like_pydantic(field: str, lax: Any, value: float) -> None:
    rows = prediction_rows(4, seed=3)
    rows[2][field] = lax
    got = decode_prediction_rows(rows)
    assert got[field][2] == value
    assert_same_columns(got, pydantic_columns(rows))


def _drop(field: str) -> Any:
    def mutate(row: dict[str, Any]) -> dict[str, Any]:
        del row[field]
        return row

    return mutate


def _set(field: str, value: Any) -> Any:
    return lambda row: {**row, field: value}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (_drop("input_token_length"), "input_token_length"),
        (_drop("kv_cache_percentage"), "kv_cache_percentage"),
        (_set("num_request_waiting", "abc"), "num_request_waiting"),
        (_set("kv_cache_percentage", 2.0), "kv_cache_percentage"),
        (_set("prefix_cache_score", -0.5), "prefix_cache_score"),
        (_set("num_request_running", None), "num_request_running"),
        (_set("prefill_tokens_in_flight", None), "prefill_tokens_in_flight"),
        (_set("input_token_length", 1.5), "input_token_length"),
        (_set("encoder_input_size", -3), "encoder_input_size"),
        (_set("pod_type", 7), "pod_type"),
        (lambda row: [1, 2, 3], None),
        (lambda row: "not a row", None),
    ],
)
def test_bad_rows_raise_validation_error_at_index_and_field(mutate: Any, field: str | None) -> None:
    rows = prediction_rows(4, seed=4)
    rows[2] = mutate(dict(rows[2]))
    with pytest.raises(ValidationError) as exc:
        decode_prediction_rows(rows)
    locs = [tuple(e["loc"]) for e in exc.value.errors()]
    assert locs == [(2,) if field is None else (2, field)]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_token_length", "1e3"),
        ("num_request_running", "\u0661\u0662"),
        ("kv_cache_percentage", "nan"),
        ("num_request_waiting", "inf"),
    ],
)
def test_fast_decoder_is_no_laxer_than_pydantic(field: str, value: str) -> None:
    """Regression: the fast path once parsed "1e3" (and non-ASCII digits) as counts."""
    rows = prediction_rows(3, seed=5)
    rows[1][field] = value
    with pytest.raises(ValidationError):
        PredictionRequest.model_validate(rows[1])
    with pytest.raises(ValidationError) as exc:
        decode_prediction_rows(rows)
    assert [tuple(e["loc"]) for e in exc.value.errors()] == [(1, field)]
