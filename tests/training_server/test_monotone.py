"""TTFT never predicted lower for more prompt tokens, queued requests or tokens in flight
(mean objective: the libraries' quantile objectives cannot honour constraints)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shared.backends import BACKENDS, FitParams
from shared.features import build_matrix, columns_from_dicts, feature_names, monotone_constraints
from shared.settings import ModelType, ObjectiveType
from shared.synthetic import prediction_row, synthetic_rows
from shared.targets import Target


def noisy_ttft_rows(n: int) -> list[dict]:
    """Synthetic TTFT rows with heavy noise, so an unconstrained fit wiggles."""
    rng = np.random.default_rng(3)
    rows = [r for r in synthetic_rows(n, seed=8) if r["actual_ttft_ms"] > 0]
    for row in rows:
        row["actual_ttft_ms"] *= float(rng.lognormal(0.0, 0.8))
    return rows


@pytest.mark.parametrize("model_type", list(ModelType))
@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("input_token_length", np.linspace(0, 20_000, 60)),
        ("num_request_waiting", np.arange(0, 30)),
        ("prefill_tokens_in_flight", np.linspace(0, 8_000, 60)),
    ],
)
def test_ttft_is_non_decreasing(model_type: ModelType, field: str, values: np.ndarray) -> None:
    rows = noisy_ttft_rows(3000)
    names = feature_names(Target.TTFT)
    x = build_matrix(columns_from_dicts(rows), names)
    y = np.array([r["actual_ttft_ms"] for r in rows])
    params = FitParams(ObjectiveType.MEAN, 0.9, n_estimators=60, max_depth=5)
    params = replace(params, monotone=monotone_constraints(Target.TTFT, names))
    backend = BACKENDS[model_type]
    model = backend.fit(x, y, params, names)
    rng = np.random.default_rng(0)
    for base in range(20):  # many starting points, each swept along `field`
        start = prediction_row(kv_cache_percentage=float(rng.uniform(0, 1)),
                               num_request_running=int(rng.integers(0, 32)),
                               input_token_length=int(rng.integers(1, 5000)),
                               prefix_cache_score=float(rng.choice([0.0, 0.5])))
        sweep = [dict(start, **{field: int(v)}) for v in values]
        predicted = backend.predict(model, build_matrix(columns_from_dicts(sweep), names))
        assert np.all(np.diff(predicted) >= -1e-6 * np.abs(predicted[:-1])), (base, predicted)


def test_constraints_name_only_ttft_physics() -> None:
    names = feature_names(Target.TTFT)
    constrained = {n for n, c in zip(names, monotone_constraints(Target.TTFT, names),
                                     strict=True) if c}
    assert constrained == {"is_queued", "input_token_length", "num_request_waiting",
                           "prefill_tokens_in_flight", "effective_input_tokens"}
    assert not any(monotone_constraints(Target.TPOT, feature_names(Target.TPOT)))


@pytest.mark.parametrize("model_type", list(ModelType))
def test_quantile_objective_trains_without_constraints(model_type: ModelType) -> None:
    """LightGBM raises on constraints with its quantile objective; we must not pass them."""
    rows = noisy_ttft_rows(500)
    names = feature_names(Target.TTFT)
    x = build_matrix(columns_from_dicts(rows), names)
    y = np.array([r["actual_ttft_ms"] for r in rows])
    params = FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=5, max_depth=3,
                       monotone=monotone_constraints(Target.TTFT, names))
    model = BACKENDS[model_type].fit(x, y, params, names)
    assert BACKENDS[model_type].num_features(model) == len(names)
