"""The hot path's body decoder (msgspec) and response builder agree with the slow, obvious
ones: the same columns as pydantic for every valid body, a decline (never a laxer verdict)
for anything pydantic would coerce or refuse, and the same response bytes."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import orjson
import pytest

from shared.decoding import decode_strict_body
from shared.predictor import prior_bundle
from shared.schemas import COUNT_MAX
from shared.settings import ModelType, ObjectiveType
from shared.targets import Target
from shared.wire import prediction_payloads, predictions_json
from tests.shared.test_features import (
    ROW_A,
    ROW_B,
    assert_same_columns,
    prediction_rows,
    pydantic_columns,
)

CLOCK = re.compile(rb'"predicted_at":"[^"]*",')


def body(rows: Any) -> bytes:
    return orjson.dumps({"requests": rows})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_valid_bodies_decode_like_pydantic(seed: int) -> None:
    rows = prediction_rows(64, seed)
    assert {r["pod_type"] for r in rows} >= {"", "prefill", "decode", "both"}
    got = decode_strict_body(body(rows))
    assert got is not None
    assert_same_columns(got, pydantic_columns(rows))


@pytest.mark.parametrize(
    "rows",
    [
        [ROW_A, ROW_B],
        [ROW_B, {**ROW_B, "pod_type": None}, {**ROW_B, "pod_type": " Decode "}],
        [{**ROW_A, "pod_type": "prefill"}] * 3,  # one distinct label for the whole call
        [{**ROW_A, "input_token_length": COUNT_MAX, "unknown_field": [1, {"x": 2}]}],
    ],
    ids=["two", "defaults-and-null-pod", "one-label", "extremes"],
)
def test_edge_bodies_decode_like_pydantic(rows: list[dict[str, Any]]) -> None:
    got = decode_strict_body(body(rows))
    assert got is not None
    assert_same_columns(got, pydantic_columns(rows))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_token_length", "5"),
        ("num_request_running", 5.0),
        ("kv_cache_percentage", "0.5"),  # lax forms pydantic accepts: it, not msgspec, decides
        ("num_request_waiting", True),
        ("kv_cache_percentage", 1.5),
        ("prefix_cache_score", -0.1),
        ("input_token_length", -1),
        ("input_token_length", COUNT_MAX + 1),
        ("num_request_running", None),
        ("pod_type", 7),
        ("encoder_input_size", "abc"),
    ],
)
def test_anything_not_plainly_valid_is_declined(field: str, value: Any) -> None:
    rows = prediction_rows(3, seed=7)
    rows[1][field] = value
    assert decode_strict_body(body(rows)) is None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[]",
        b'{"requests": []}',
        b'{"requests": {}}',
        b'{"rows": []}',
        b'{"requests": [1, 2]}',
        b'{"requests": [{"kv_cache_percentage": 0.5}]}',
    ],
)
def test_bad_envelopes_are_declined(raw: bytes) -> None:
    assert decode_strict_body(raw) is None


@pytest.mark.parametrize("rows", [1, 3, 100])
def test_response_bytes_equal_encoding_the_payloads(rows: int) -> None:
    bundle = prior_bundle(ModelType.XGBOOST, ObjectiveType.QUANTILE, 0.9)
    rng = np.random.default_rng(rows)
    predictions = {
        Target.TTFT: rng.uniform(0, 5e4, rows) * rng.integers(0, 2, rows),
        Target.TPOT: rng.lognormal(3, 1, rows),
    }
    want = orjson.dumps(prediction_payloads(bundle, predictions))
    got = predictions_json(bundle, predictions)
    # predicted_at is read from the clock in each: compare it apart
    assert all(r["predicted_at"].endswith("Z") for r in orjson.loads(got))
    assert orjson.loads(got)[0].keys() == orjson.loads(want)[0].keys()
    assert CLOCK.sub(b"", got) == CLOCK.sub(b"", want)  # byte for byte
