"""Properties of the feature and predict path, over any row the contract allows (hypothesis).

Valid rows (spec section 2: fractions in [0, 1], counts in [0, 2**63 - 1], pod_type any
string or null, optional fields absent or present, unknown fields ignored) decode alike in
both decoders, to features with no NaN or inf, and every bundle (a real XGBoost and
LightGBM quantile model, library or compiled walk, with the largest live calibration; and
the cold-start prior) answers finite, non-negative latencies for them. Invalid rows are
refused by both decoders and by the strict route, with the field named.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from devkit.synthetic import synthetic_rows
from prediction_server.app import create_app
from shared.artifact import Manifest, TargetManifest, new_version, write_bundle
from shared.backends import FitParams, backend_for
from shared.decoding import decode_prediction_rows, decode_strict_body
from shared.features import (
    FEATURES,
    FRACTION_FIELDS,
    OPTIONAL_COUNT_FIELDS,
    REQUIRED_COUNT_FIELDS,
    build_matrix,
    columns_from_dicts,
    feature_names,
)
from shared.live_calibration import MAX_LIVE_LOG_OFFSET, LiveOffsets
from shared.predictor import LoadedBundle, load_current_bundle, prior_bundle
from shared.schemas import COUNT_MAX
from shared.settings import ModelType, ObjectiveType, PredictionSettings
from shared.target_space import MAX_MS, TargetSpace, space_for, to_label, to_ms
from shared.targets import TARGETS
from shared.wire import predictions_json
from tests.conftest import publish_trained_bundle
from training_server.retrain.scoring import evaluate

# Bounded and derandomized: the same examples on every CI run. No deadline: the first
# examples of a module pay for loading models. Module-scoped fixtures only.
CHEAP = settings(max_examples=150, deadline=None, derandomize=True, database=None)
COSTLY = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    # rows of eleven fields, up to 40 of them per batch: big by design
    suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow],
)

COUNT_FIELDS = REQUIRED_COUNT_FIELDS + OPTIONAL_COUNT_FIELDS
REQUIRED_FIELDS = FRACTION_FIELDS + REQUIRED_COUNT_FIELDS
NUMBER_FIELDS = FRACTION_FIELDS + COUNT_FIELDS

# ---------------------------------------------------------------- valid rows, by the contract

fractions = st.one_of(
    st.floats(min_value=0.0, max_value=1.0),
    st.sampled_from([0, 1, 0.0, 1.0, 5e-324, 0.25, 0.75, 1.0 - 2**-53]),  # JSON 0 and 1 too
)
counts = st.one_of(
    st.integers(min_value=0, max_value=COUNT_MAX),  # anything the contract allows
    st.integers(min_value=0, max_value=100_000),  # what a server sees
    st.sampled_from([0, 1, 2**31 - 1, 2**53, 2**53 + 1, 2**62, COUNT_MAX - 1, COUNT_MAX]),
)
pod_types = st.one_of(
    st.none(),
    st.sampled_from(["", "prefill", "decode", "both", "prefill-decode", " Decode ", "PREFILL"]),
    st.text(max_size=24),
)
unknown_values = st.one_of(  # ignored by contract, whatever they hold
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
)
valid_rows = st.fixed_dictionaries(
    {**{f: fractions for f in FRACTION_FIELDS}, **{f: counts for f in REQUIRED_COUNT_FIELDS}},
    optional={
        "pod_type": pod_types,
        **{f: counts for f in OPTIONAL_COUNT_FIELDS},
        "some_future_field": unknown_values,
    },
)
batches = st.lists(valid_rows, min_size=1, max_size=40)
HUGE_ROW = {  # every count at the contract's bound
    **{f: 1.0 for f in FRACTION_FIELDS},
    **{f: COUNT_MAX for f in COUNT_FIELDS},
    "pod_type": "prefill",
}


def strict_body(rows: list[Any]) -> bytes:
    """The body as a client sends it; the stdlib writes integers of any size."""
    return json.dumps({"requests": rows}).encode()


def assert_finite_features(columns: dict[str, np.ndarray], n: int) -> None:
    for name, column in columns.items():
        assert column.shape == (n,), name
        assert np.isfinite(column).all(), name
    matrix = build_matrix(columns, list(FEATURES))  # float32, as the models see them
    assert np.isfinite(matrix).all(), dict(zip(FEATURES, matrix.T, strict=True))
    for target in TARGETS:
        for token_in_flight in (True, False):
            for encoder in (True, False):
                names = feature_names(target, token_in_flight=token_in_flight, encoder=encoder)
                assert np.isfinite(build_matrix(columns, names)).all()


@CHEAP
@given(rows=batches)
def test_valid_rows_decode_alike_to_finite_features(rows: list[dict[str, Any]]) -> None:
    slow = decode_prediction_rows(rows)
    fast = decode_strict_body(strict_body(rows))
    assert fast is not None, "a plainly valid body must take the fast path"
    assert slow.keys() == fast.keys()
    for name in slow:
        np.testing.assert_array_equal(slow[name], fast[name], err_msg=name)
    assert_finite_features(slow, len(rows))


def test_counts_at_the_bound_give_finite_features() -> None:
    """Regression: 2**63 - 1 in every count, as float64 and as the models' float32."""
    body = strict_body([HUGE_ROW])
    for columns in (decode_prediction_rows([HUGE_ROW]), decode_strict_body(body)):
        assert columns is not None
        assert_finite_features(columns, 1)
        assert columns["input_token_length"][0] == float(COUNT_MAX)


# ------------------------------------------------------------------- the predict path

BUNDLES = [
    "xgboost",
    "xgboost-library",
    "xgboost-live-max",
    "lightgbm",
    "lightgbm-library",
    "lightgbm-live-max",
    "prior",
]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoadedBundle]:
    """Published quantile bundles loaded as a server loads them, in each serving variant."""
    out = {"prior": prior_bundle(ModelType.XGBOOST, ObjectiveType.QUANTILE, 0.9)}
    for model_type in (ModelType.XGBOOST, ModelType.LIGHTGBM):
        model_dir = tmp_path_factory.mktemp(model_type.value)
        publish_trained_bundle(model_dir, model_type, ObjectiveType.QUANTILE, seed=3)
        bundle = load_current_bundle(model_dir)
        assert bundle is not None and not bundle.is_prior and bundle.compiled
        name = model_type.value
        out[name] = bundle
        out[f"{name}-library"] = replace(bundle, compiled={})  # the library's own predict
        out[f"{name}-live-max"] = bundle.with_live(
            LiveOffsets(pool={t: MAX_LIVE_LOG_OFFSET for t in TARGETS})
        )
    assert sorted(out) == sorted(BUNDLES)
    return out


def assert_servable(bundle: LoadedBundle, columns: dict[str, np.ndarray], n: int) -> None:
    predictions = bundle.predict(columns)
    for target in TARGETS:
        values = predictions[target]
        assert values.shape == (n,)
        assert np.isfinite(values).all(), (target, values)
        assert (values >= 0.0).all(), (target, values)
    # As the strict route writes them: numbers, never null (orjson writes inf and NaN so).
    for answer in orjson.loads(predictions_json(bundle, predictions)):
        assert isinstance(answer["ttft_ms"], float) and isinstance(answer["tpot_ms"], float)


@pytest.mark.parametrize("name", BUNDLES)
@COSTLY
@given(rows=batches)
def test_predictions_are_finite_and_non_negative(
    bundles: dict[str, LoadedBundle], name: str, rows: list[dict[str, Any]]
) -> None:
    assert_servable(bundles[name], decode_prediction_rows(rows), len(rows))


@pytest.mark.parametrize("name", BUNDLES)
def test_counts_at_the_bound_give_finite_predictions(
    bundles: dict[str, LoadedBundle], name: str
) -> None:
    """Regression: the largest counts, alone and beside an ordinary row."""
    rows = [
        HUGE_ROW,
        {**HUGE_ROW, "prefix_cache_score": 0.0, "kv_cache_percentage": 0.0},
        {**synthetic_rows(1, seed=4)[0], "pod_type": None},
    ]
    assert_servable(bundles[name], decode_prediction_rows(rows), len(rows))


# ---------------------------------------------------- target spaces and absurd actuals


def test_to_ms_never_overflows() -> None:
    """Regression: exp() of a large model output was inf (a RuntimeWarning, an error here),
    which the JSON encoder writes as null and the EPP reads as 0 ms."""
    columns = {"num_request_waiting": np.array([0.0, float(COUNT_MAX), 5.0, 0.0])}
    outputs = np.array([800.0, 700.0, 1e30, -1e30])
    for space in TargetSpace:
        ms = to_ms(space, columns, outputs)
        assert np.isfinite(ms).all() and (ms <= MAX_MS).all(), (space, ms)
    float32_outputs = np.array([np.inf, 3e38], dtype=np.float32)  # a broken "ms" model
    assert to_ms(TargetSpace.MS, columns, float32_outputs).max() == MAX_MS


@CHEAP
@given(ms=st.floats(min_value=0.0, max_value=1.7976931348623157e308), waiting=counts)
def test_labels_are_finite_for_any_valid_actual(ms: float, waiting: int) -> None:
    columns = {"num_request_waiting": np.array([float(waiting)])}
    for space in TargetSpace:
        label = to_label(space, columns, np.array([ms]))
        assert np.isfinite(label).all()
        assert np.isfinite(to_ms(space, columns, label)).all()


def test_a_model_fitted_on_absurd_actuals_answers_finite(tmp_path: Path) -> None:
    """Regression: actuals have no upper bound in the contract; 1e300 ms fitted in log
    space made exp() overflow on the predict path before to_ms was capped at MAX_MS."""
    rows = synthetic_rows(300, seed=8)
    for model_type in (ModelType.XGBOOST, ModelType.LIGHTGBM):
        backend = backend_for(model_type)
        params = FitParams(
            objective=ObjectiveType.QUANTILE, quantile=0.9, n_estimators=10, max_depth=3
        )
        models, entries = {}, {}
        for target in TARGETS:
            measured = [r for r in rows if r[target.actual_field] > 0]
            columns = columns_from_dicts(measured)
            names = feature_names(target)
            absurd = np.array([r[target.actual_field] for r in measured]) * 1e300
            label = to_label(space_for(target), columns, absurd)
            models[target] = backend.fit(build_matrix(columns, names), label, params, names)
            entries[target] = TargetManifest(
                file=None, features=list(names), space=space_for(target)
            )
        model_dir = tmp_path / model_type.value
        write_bundle(
            model_dir,
            Manifest(
                version=new_version(),
                created_at=datetime.now(UTC),
                model_type=model_type,
                objective=ObjectiveType.QUANTILE,
                quantile=0.9,
                targets=entries,
            ),
            models,
        )
        bundle = load_current_bundle(model_dir)
        assert bundle is not None
        predictions = bundle.with_live(
            LiveOffsets(pool={t: MAX_LIVE_LOG_OFFSET for t in TARGETS})
        ).predict(decode_prediction_rows([HUGE_ROW, synthetic_rows(1, seed=9)[0]]))
        for values in predictions.values():
            assert np.isfinite(values).all() and (values > 0).all()


@CHEAP
@given(
    pairs=st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=1.7976931348623157e308),
            st.floats(min_value=0.0, max_value=1.7976931348623157e308),
        ),
        min_size=1,
        max_size=50,
    )
)
def test_evaluation_of_any_valid_latencies_is_finite(pairs: list[tuple[float, float]]) -> None:
    """Regression: a retrain scoring absurd (valid) actuals squared them past the float
    range: RuntimeWarning, so under -W error a failed retrain, else an inf RMSE."""
    actual, predicted = (np.array(v) for v in zip(*pairs, strict=True))
    metrics = evaluate(actual, predicted, 0.9)
    for name, value in metrics.items():
        assert value is not None and math.isfinite(value), (name, value)
    rmse, mae = metrics["rmse"], metrics["mae"]
    assert rmse is not None and mae is not None
    assert rmse >= mae * (1 - 1e-9)  # RMS >= mean, by Jensen


# ------------------------------------------------------------------------- invalid rows

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
NAN_LIKE = ["nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity", "-Infinity", "INF", " nan "]
wrong_types = st.one_of(
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=8),  # never a number
)


@st.composite
def invalid_batches(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, str, bool]:
    """(rows, index of the bad row, the field it names, whether plain JSON can carry it)."""
    kind = draw(
        st.sampled_from(
            [
                "fraction_range",
                "fraction_nan_like",
                "fraction_non_finite",
                "count_negative",
                "count_fraction",
                "count_too_big",
                "count_nan_like",
                "missing",
                "wrong_type",
                "required_null",
                "pod_type_type",
            ]
        )
    )
    row = draw(valid_rows)
    field = draw(
        st.sampled_from(
            {
                "fraction_range": FRACTION_FIELDS,
                "fraction_nan_like": FRACTION_FIELDS,
                "fraction_non_finite": FRACTION_FIELDS,
                "count_negative": COUNT_FIELDS,
                "count_fraction": COUNT_FIELDS,
                "count_too_big": COUNT_FIELDS,
                "count_nan_like": COUNT_FIELDS,
                "missing": REQUIRED_FIELDS,
                "wrong_type": NUMBER_FIELDS,
                "required_null": REQUIRED_FIELDS,
                "pod_type_type": ("pod_type",),
            }[kind]
        )
    )
    json_ok = True
    if kind == "missing":
        row.pop(field)
    else:
        if kind == "fraction_range":
            value: Any = draw(
                st.one_of(
                    st.floats(min_value=1.0, exclude_min=True, allow_infinity=False),
                    st.floats(max_value=0.0, exclude_max=True, allow_infinity=False),
                    st.sampled_from([2, -1, 10**30]),
                )
            )
        elif kind in ("fraction_nan_like", "count_nan_like"):
            value = draw(st.sampled_from(NAN_LIKE))
        elif kind == "fraction_non_finite":  # only a Python caller can pass these
            value, json_ok = draw(st.sampled_from([math.nan, math.inf, -math.inf])), False
        elif kind == "count_negative":
            value = draw(st.one_of(st.integers(max_value=-1), st.just(-(2**64))))
        elif kind == "count_fraction":
            value = draw(finite_floats.filter(lambda x: x != int(x)))
        elif kind == "count_too_big":
            value = draw(
                st.one_of(
                    st.integers(min_value=COUNT_MAX + 1),
                    st.sampled_from([2**63, 2**64, 2**64 + 1, 10**30]),
                )
            )
        elif kind == "required_null":
            value = None
        elif kind == "pod_type_type":
            value = draw(
                st.one_of(
                    st.integers(),
                    st.booleans(),
                    finite_floats,
                    st.lists(st.text(max_size=2), max_size=2),
                )
            )
        else:
            value = draw(wrong_types)
        row[field] = value
    before = draw(st.lists(valid_rows, max_size=3))
    after = draw(st.lists(valid_rows, max_size=3))
    return [*before, row, *after], len(before), field, json_ok


ROW = {**synthetic_rows(1, seed=2)[0], "pod_type": "decode"}
# Found by fuzzing, always tried: booleans passed for numbers (true as 1), a list made the
# fast path's numpy table ragged (ValueError: 500), integers past 64 bits, NaN-like text.
KNOWN_BAD = [
    ([{**ROW, "num_request_waiting": True}], 0, "num_request_waiting", True),
    ([ROW, {**ROW, "kv_cache_percentage": False}], 1, "kv_cache_percentage", True),
    ([{**ROW, "input_token_length": [1, 2]}, ROW], 0, "input_token_length", True),
    ([ROW, {**ROW, "encoder_input_size": 2**64}], 1, "encoder_input_size", True),
    ([{**ROW, "prefix_cache_score": "NaN"}], 0, "prefix_cache_score", True),
    ([{**ROW, "prefix_cache_score": math.inf}], 0, "prefix_cache_score", False),
]


def with_known_bad(test: Any) -> Any:
    for case in KNOWN_BAD:
        test = example(case=case)(test)
    return test


@CHEAP
@with_known_bad
@given(case=invalid_batches())
def test_invalid_rows_are_refused_by_both_decoders(
    case: tuple[list[dict[str, Any]], int, str, bool],
) -> None:
    rows, index, field, _ = case
    with pytest.raises(ValidationError) as raised:
        decode_prediction_rows(rows)
    locations = [tuple(e["loc"]) for e in raised.value.errors()]
    assert (index, field) in locations, locations
    assert decode_strict_body(strict_body(rows)) is None


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    model_dir = tmp_path_factory.mktemp("strict") / "models"
    model_dir.mkdir()
    publish_trained_bundle(model_dir, seed=6)
    with TestClient(create_app(PredictionSettings(model_dir=model_dir))) as client:
        yield client


@CHEAP
@with_known_bad
@given(case=invalid_batches())
def test_the_strict_route_answers_422_naming_the_field(
    client: TestClient,
    case: tuple[list[dict[str, Any]], int, str, bool],
) -> None:
    rows, index, field, json_ok = case
    if not json_ok:  # NaN in a body is not JSON: a 422 for the body, not for a field
        assert client.post("/predict/bulk/strict", content=strict_body(rows)).status_code == 422
        return
    response = client.post(
        "/predict/bulk/strict",
        content=strict_body(rows),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    locations = [e["loc"] for e in response.json()["detail"]]
    assert ["body", "requests", index, field] in locations, locations


@COSTLY
@given(rows=st.lists(valid_rows, min_size=1, max_size=10))
def test_the_strict_route_answers_every_valid_batch(
    client: TestClient, rows: list[dict[str, Any]]
) -> None:
    response = client.post(
        "/predict/bulk/strict",
        content=strict_body(rows),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200, response.text
    predictions = response.json()["predictions"]
    assert len(predictions) == len(rows)
    for answer in predictions:
        assert answer["ttft_ms"] >= 0 and answer["tpot_ms"] >= 0
        assert math.isfinite(answer["ttft_ms"]) and math.isfinite(answer["tpot_ms"])
        assert answer["model_version"] != "cold-start-prior"
