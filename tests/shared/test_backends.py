"""The pinball objective both backends fit with: its start, its step scale, and that a fit
lands near the requested quantile on data with a known distribution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared.backends import BACKENDS, MIN_SPREAD, FitParams, objective_for
from shared.settings import ModelType, ObjectiveType

NAMES = ("a", "b")


def test_quantile_objective_start_and_step_by_hand() -> None:
    y = np.arange(1.0, 11.0)  # 1..10: median 5.5, linear-interpolated p90 = 9.1
    objective = objective_for(y, FitParams(ObjectiveType.QUANTILE, 0.9))
    assert objective.start == pytest.approx(9.1)
    assert objective.hessian == pytest.approx(1.0 / (9.1 - 5.5))
    # under-predicted rows pull up by q, over-predicted rows push down by 1 - q
    assert objective.gradient is not None
    gradient = objective.gradient(np.array([5.0, 5.0]), np.array([6.0, 4.0]))
    np.testing.assert_allclose(gradient, [-0.9, 0.1])


def test_trees_may_start_lower_but_a_model_without_trees_is_the_quantile() -> None:
    y = np.arange(1.0, 11.0)
    trees = FitParams(ObjectiveType.QUANTILE, 0.9, start_quantile=0.5)
    assert objective_for(y, trees).start == pytest.approx(5.5)
    assert objective_for(y, trees).hessian == pytest.approx(1.0 / (9.1 - 5.5))  # same step
    constant = FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=0, start_quantile=0.5)
    assert objective_for(y, constant).start == pytest.approx(9.1)


@pytest.mark.parametrize("model_type", list(ModelType))
def test_a_model_without_trees_answers_the_quantile_of_its_labels(model_type: ModelType) -> None:
    y = np.random.default_rng(2).lognormal(0.0, 1.0, 300)
    x = np.random.default_rng(3).uniform(0, 1, (300, 2))
    params = FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=0, start_quantile=0.5)
    model = BACKENDS[model_type].fit(x, y, params, NAMES)
    np.testing.assert_allclose(
        BACKENDS[model_type].predict(model, x[:5]), np.quantile(y, 0.9), rtol=1e-5
    )


@pytest.mark.parametrize("model_type", list(ModelType))
def test_split_count_is_zero_for_a_constant_and_counts_the_nodes_of_trees(
    model_type: ModelType,
) -> None:
    # y rises with feature a: the trees split on it; the model without trees cannot
    x = np.random.default_rng(4).uniform(0, 1, (400, 2))
    y = np.exp(3 * x[:, 0]) + np.random.default_rng(5).uniform(0, 0.1, 400)
    backend = BACKENDS[model_type]
    constant = FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=0, start_quantile=0.5)
    assert backend.split_count(backend.fit(x, y, constant, NAMES)) == 0
    trees = FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=5, max_depth=2)
    # 5 trees of depth 2: at most 3 splits each, and the signal makes every tree split
    assert 5 <= backend.split_count(backend.fit(x, y, trees, NAMES)) <= 15


def test_constant_labels_keep_a_finite_step() -> None:
    objective = objective_for(np.full(50, 3.0), FitParams(ObjectiveType.QUANTILE, 0.9))
    assert objective.start == 3.0 and objective.hessian == pytest.approx(1.0 / MIN_SPREAD)


def test_mean_objective_is_squared_error_from_the_mean() -> None:
    objective = objective_for(np.array([1.0, 2.0, 6.0]), FitParams(ObjectiveType.MEAN, 0.9))
    assert (objective.start, objective.hessian, objective.gradient) == (3.0, 1.0, None)


@pytest.mark.parametrize("spread", [0.03, 1.0])
@pytest.mark.parametrize("model_type", list(ModelType))
def test_fit_covers_the_requested_quantile_at_any_spread(
    model_type: ModelType, spread: float, tmp_path: Path
) -> None:
    """y = a + normal(0, spread) * (1 + b): the conditional p90 is known. The fit covers
    about 90 % of fresh rows whether the spread is 3 % (TPOT-like) or 100 % (TTFT-like), and
    the saved file predicts exactly what the fitted model did (the start is baked in)."""
    rng = np.random.default_rng(7)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.column_stack([rng.uniform(0, 3, n), rng.integers(0, 2, n)]).astype(np.float32)
        return x, x[:, 0] + rng.normal(0.0, spread, n) * (1 + x[:, 1])

    x, y = draw(4000)
    backend = BACKENDS[model_type]
    model = backend.fit(x, y, FitParams(ObjectiveType.QUANTILE, 0.9, n_estimators=200), NAMES)
    fresh_x, fresh_y = draw(4000)
    predicted = backend.predict(model, fresh_x)
    assert np.mean(fresh_y <= predicted) == pytest.approx(0.9, abs=0.03)
    # sharper where the noise is smaller: the model learned the shape, not one offset
    wide = fresh_x[:, 1] == 1
    margin = predicted - fresh_x[:, 0]
    assert np.median(margin[wide]) > np.median(margin[~wide])
    path = tmp_path / f"model{backend.file_suffix}"
    backend.save(model, path)
    np.testing.assert_allclose(backend.predict(backend.load(path), fresh_x), predicted, rtol=1e-5)


@pytest.mark.parametrize("model_type", list(ModelType))
def test_a_leaf_prior_limits_how_far_a_few_rows_of_one_event_pull_their_leaf(
    model_type: ModelType,
) -> None:
    """A stall: 6 rows 4.0 above the rest at the edge of a feature's range. With 5 rows per
    leaf alone the trees give that corner the stall's level; a prior of 10 rows slows every
    step of a 6-row leaf to 6 / 16 of itself, and 30 rows to 6 / 36, so the corner stays
    nearer its neighbours, while two regions of 300-600 rows (one a real 1.0 above the
    other) are learned as before (benchmarks/README.md: sharegpt's stalls of 5 and 9)."""
    rng = np.random.default_rng(11)
    n = 900
    x = np.column_stack([rng.uniform(0, 10, n), rng.uniform(0, 1, n)]).astype(np.float32)
    y = rng.normal(0.0, 0.3, n) + np.where(x[:, 1] > 2 / 3, 1.0, 0.0)
    stall = np.column_stack([np.full(6, 9.9), np.full(6, 0.1)]).astype(np.float32)
    x, y = np.vstack([x, stall]), np.concatenate([y, np.full(6, 4.0)])
    probe = np.array([[9.9, 0.1], [5.0, 0.9], [5.0, 0.1]], dtype=np.float32)
    backend = BACKENDS[model_type]

    def answers(prior: float) -> np.ndarray:
        params = FitParams(ObjectiveType.QUANTILE, 0.9, start_quantile=0.5, leaf_prior_rows=prior)
        return backend.predict(backend.fit(x, y, params, NAMES), probe)

    plain, ten, thirty = answers(0.0), answers(10.0), answers(30.0)
    assert plain[0] > 3.8  # the corner follows the stall
    assert ten[0] < plain[0] - 0.5 and thirty[0] < 2.0  # the prior holds it back
    p90 = 0.3 * 1.2816  # the p90 of the noise
    # the populated regions: near their p90s, and the prior of 10 moves them by little
    np.testing.assert_allclose(plain[1:], [1.0 + p90, p90], atol=0.25)
    np.testing.assert_allclose(ten[1:], plain[1:], atol=0.1)
