"""TTFT never predicted lower for more prompt tokens or tokens in flight: the served answer
(model output mapped back to ms) of both backends and both objectives, swept along each
constrained field from many starting points. The queue: TTFT is fitted per queued request,
so past the longest queue seen it grows in proportion to (1 + waiting); the per-request
time itself is left free (shared.features.QUEUE_FEATURES)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from devkit.synthetic import prediction_row, synthetic_rows
from shared.backends import BACKENDS, FitParams
from shared.features import Columns, columns_from_dicts, feature_names, monotone_constraints
from shared.settings import ModelType, ObjectiveType
from shared.target_space import space_for
from shared.targets import Target
from training_server.retrain.fit import TargetFit, fit_model
from training_server.retrain.scoring import served_ms


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
        start_quantile=0.5,
        monotone=monotone_constraints(Target.TTFT, names, per_queued=True),
    )
    backend = BACKENDS[model_type]
    fit = fitted(backend, params, names, columns, y)
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


def fitted(
    backend: Any, params: FitParams, names: tuple[str, ...], columns: Columns, y: np.ndarray
) -> TargetFit:
    space = space_for(Target.TTFT)
    model = fit_model(backend, params, names, columns, y, space)
    return TargetFit(model, names, len(y), 0, space=space)


@pytest.mark.parametrize("model_type", list(ModelType))
def test_past_the_longest_queue_seen_ttft_grows_with_the_queue(model_type: ModelType) -> None:
    rows = noisy_ttft_rows(3000)
    names = feature_names(Target.TTFT)
    columns = columns_from_dicts(rows)
    y = np.array([r["actual_ttft_ms"] for r in rows])
    longest = int(columns["num_request_waiting"].max())
    params = FitParams(
        ObjectiveType.QUANTILE,
        0.9,
        n_estimators=60,
        max_depth=5,
        monotone=monotone_constraints(Target.TTFT, names, per_queued=True),
    )
    backend = BACKENDS[model_type]
    fit = fitted(backend, params, names, columns, y)
    queues = np.arange(longest, longest + 200, 7)
    sweep = [prediction_row(num_request_waiting=int(w), input_token_length=800) for w in queues]
    predicted = served_ms(backend, fit, columns_from_dicts(sweep))
    np.testing.assert_allclose(predicted / (1 + queues), predicted[0] / (1 + queues[0]), rtol=1e-5)


def test_constraints_name_only_ttft_physics() -> None:
    names = feature_names(Target.TTFT)

    def constrained(per_queued: bool) -> set[str]:
        flags = monotone_constraints(Target.TTFT, names, per_queued=per_queued)
        return {n for n, c in zip(names, flags, strict=True) if c}

    assert constrained(False) == {
        "is_queued",
        "input_token_length",
        "num_request_waiting",
        "prefill_tokens_in_flight",
        "effective_input_tokens",
    }
    # Per queued request, the (1 + waiting) factor carries the queue; the trees leave it free.
    assert constrained(True) == {
        "input_token_length",
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
    fit = fitted(backend, params, names, columns, y)
    sweep = [prediction_row(input_token_length=int(v)) for v in np.linspace(0, 20_000, 60)]
    predicted = served_ms(backend, fit, columns_from_dicts(sweep))
    assert np.any(np.diff(predicted) < -1e-6 * np.abs(predicted[:-1]))
