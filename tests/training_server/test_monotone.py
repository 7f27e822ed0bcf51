"""TTFT never predicted lower for more prompt tokens, queued requests or tokens in flight:
the served answer (model output mapped back to ms, calibration factor) of both backends and
both objectives, swept along each constrained field from many starting points."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from latency_cli.synthetic import prediction_row, synthetic_rows
from shared.backends import BACKENDS, FitParams
from shared.features import columns_from_dicts, feature_names, monotone_constraints
from shared.settings import ModelType, ObjectiveType
from shared.target_space import space_for
from shared.targets import Target
from training_server.calibration import split_oldest
from training_server.training import fit_target, served_ms


def noisy_ttft_rows(n: int) -> list[dict[str, Any]]:
    """Synthetic TTFT rows with heavy noise, so an unconstrained fit wiggles."""
    rng = np.random.default_rng(3)
    rows = [r for r in synthetic_rows(n, seed=8) if r["actual_ttft_ms"] > 0]
    for row in rows:
        row["actual_ttft_ms"] *= float(rng.lognormal(0.0, 0.8))
    return rows


@pytest.mark.parametrize("objective", list(ObjectiveType))
@pytest.mark.parametrize("model_type", list(ModelType))
@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("input_token_length", np.linspace(0, 20_000, 60)),
        ("num_request_waiting", np.arange(0, 30)),
        ("prefill_tokens_in_flight", np.linspace(0, 8_000, 60)),
    ],
)
def test_ttft_is_non_decreasing(
    model_type: ModelType, objective: ObjectiveType, field: str, values: np.ndarray
) -> None:
    rows = noisy_ttft_rows(3000)
    names = feature_names(Target.TTFT)
    columns = columns_from_dicts(rows)
    y = np.array([r["actual_ttft_ms"] for r in rows])
    params = FitParams(
        objective,
        0.9,
        n_estimators=60,
        max_depth=5,
        monotone=monotone_constraints(Target.TTFT, names),
    )
    backend = BACKENDS[model_type]
    train, test = split_oldest(columns, y, 0.8)
    fit = fit_target(
        backend, params, names, train, test, space=space_for(Target.TTFT), min_samples=1
    )
    rng = np.random.default_rng(0)
    for base in range(20):  # many starting points, each swept along `field`
        start = prediction_row(
            kv_cache_percentage=float(rng.uniform(0, 1)),
            num_request_running=int(rng.integers(0, 32)),
            input_token_length=int(rng.integers(1, 5000)),
            prefix_cache_score=float(rng.choice([0.0, 0.5])),
        )
        sweep = [dict(start, **{field: int(v)}) for v in values]
        predicted = served_ms(backend, fit, columns_from_dicts(sweep))
        assert np.all(np.diff(predicted) >= -1e-6 * np.abs(predicted[:-1])), (base, predicted)


def test_constraints_name_only_ttft_physics() -> None:
    names = feature_names(Target.TTFT)
    constrained = {
        n for n, c in zip(names, monotone_constraints(Target.TTFT, names), strict=True) if c
    }
    assert constrained == {
        "is_queued",
        "input_token_length",
        "num_request_waiting",
        "prefill_tokens_in_flight",
        "effective_input_tokens",
    }
    assert not any(monotone_constraints(Target.TPOT, feature_names(Target.TPOT)))


@pytest.mark.parametrize("model_type", list(ModelType))
def test_without_constraints_the_same_fit_does_decrease(model_type: ModelType) -> None:
    """The sweeps above can fail: on the same noisy rows an unconstrained quantile fit
    predicts a lower TTFT for more prompt tokens somewhere."""
    rows = noisy_ttft_rows(3000)
    names = feature_names(Target.TTFT)
    columns = columns_from_dicts(rows)
    y = np.array([r["actual_ttft_ms"] for r in rows])
    params = FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=60, max_depth=5)
    backend = BACKENDS[model_type]
    train, test = split_oldest(columns, y, 0.8)
    fit = fit_target(
        backend, params, names, train, test, space=space_for(Target.TTFT), min_samples=1
    )
    sweep = [prediction_row(input_token_length=int(v)) for v in np.linspace(0, 20_000, 60)]
    predicted = served_ms(backend, fit, columns_from_dicts(sweep))
    assert np.any(np.diff(predicted) < -1e-6 * np.abs(predicted[:-1]))
