"""Model choice per retrain on real XGBoost/LightGBM fits over small generated data: the
running p90 until a model beats it, the choice and every candidate's loss recorded, and
the served p90 calibrated by out-of-fold scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from devkit.synthetic import synthetic_rows
from shared.backends import backend_for
from shared.features import Columns, columns_from_dicts
from shared.settings import Calibration, ModelType, TrainingSettings
from shared.target_space import TargetSpace
from shared.targets import Target
from training_server.retrain.candidates import P90, P90_PER_QUEUED, SHARP_FROM_ROWS, candidates
from training_server.retrain.scoring import served_ms
from training_server.retrain.target import train_target


def settings(**overrides: object) -> TrainingSettings:
    values: dict[str, object] = {
        "min_samples_for_retrain": 50,
        "n_estimators": 40,
        "model_dir": Path("unused"),
    }
    values.update(overrides)
    return TrainingSettings(**values)  # type: ignore[arg-type]


def rows_of(target: Target, n: int, seed: int) -> tuple[Columns, np.ndarray]:
    rows = [r for r in synthetic_rows(4 * n, seed=seed) if r[target.actual_field] > 0][:n]
    return columns_from_dicts(rows), np.array([r[target.actual_field] for r in rows])


def noise_only(n: int, seed: int) -> tuple[Columns, np.ndarray]:
    """TTFT rows whose latency has nothing to do with their features."""
    columns, _ = rows_of(Target.TTFT, n, seed)
    columns["num_request_waiting"] = np.zeros(n)  # one queue regime: p90 == p90 per queued
    rng = np.random.default_rng(seed)
    return columns, rng.lognormal(5.0, 0.4, n)


def empty() -> tuple[Columns, np.ndarray]:
    return columns_from_dicts([]), np.array([])


@pytest.mark.parametrize("model_type", list(ModelType))
def test_trees_are_served_once_they_beat_the_running_p90(model_type: ModelType) -> None:
    s = settings(model_type=model_type)
    fit = train_target(s, Target.TTFT, rows_of(Target.TTFT, 1500, 1), rows_of(Target.TTFT, 150, 2))
    assert fit.choice is not None and fit.choice.startswith("trees_")
    assert set(fit.candidates) == {c.name for c in candidates(Target.TTFT, s, 1500)}
    assert fit.candidates[fit.choice] == min(fit.candidates.values())
    assert fit.candidates[fit.choice] < 0.8 * fit.candidates[P90.name]


@pytest.mark.parametrize("model_type", list(ModelType))
def test_without_signal_the_running_p90_is_served(model_type: ModelType) -> None:
    s = settings(model_type=model_type)
    (columns, y), test = noise_only(1500, 3), noise_only(200, 4)
    fit = train_target(s, Target.TTFT, (columns, y), test)
    assert fit.choice in (P90.name, P90_PER_QUEUED.name), fit.candidates
    # A model without trees: every row gets the rows' p90 times the conformal factor.
    served = served_ms(backend_for(model_type), fit, test[0])
    expected = np.quantile(y, 0.9) * np.exp(fit.log_offset)
    np.testing.assert_allclose(served, expected, rtol=1e-4)
    assert abs(fit.log_offset) < 0.1  # a p90 of 1,500 rows needs next to no correction


def test_below_the_minimum_only_the_running_p90_competes() -> None:
    s = settings()
    fit = train_target(s, Target.TPOT, rows_of(Target.TPOT, 40, 5), empty())
    assert set(fit.candidates) == {P90.name}
    assert fit.choice == P90.name and fit.space is TargetSpace.LOG_MS
    assert train_target(s, Target.TPOT, rows_of(Target.TPOT, 9, 5), empty()).model is None


@pytest.mark.parametrize("target", list(Target))
def test_the_sharp_trees_compete_only_from_their_minimum_rows(target: Target) -> None:
    """Below SHARP_FROM_ROWS a retrain fits one tree candidate, from there two."""
    s, below = settings(), SHARP_FROM_ROWS - 1
    few = train_target(s, target, rows_of(target, below, 12), empty())
    many = train_target(s, target, rows_of(target, SHARP_FROM_ROWS, 12), empty())
    assert [name for name in few.candidates if name.startswith("trees_")] == ["trees_40x4"]
    assert [name for name in many.candidates if name.startswith("trees_")] == [
        "trees_40x4",
        "trees_40x4_sharp",
    ]
    assert set(few.candidates) == {c.name for c in candidates(target, s, below)}


def test_without_selection_the_configured_trees_serve() -> None:
    s = settings(model_selection=False)
    fit = train_target(s, Target.TTFT, rows_of(Target.TTFT, 600, 6), empty())
    assert fit.choice == "trees_40x4" and set(fit.candidates) == {"trees_40x4"}
    assert fit.space is TargetSpace.LOG_MS_PER_QUEUED


@pytest.mark.parametrize("target", list(Target))
def test_out_of_fold_calibration_covers_new_rows(target: Target) -> None:
    """The factor comes from the training rows' own out-of-fold scores (no held-out row is
    needed): on rows from the same distribution the served p90 covers about 90 %."""
    fit = train_target(settings(), target, rows_of(target, 2000, 7), empty())
    columns, y = rows_of(target, 3000, 8)
    covered = np.mean(y <= served_ms(backend_for(ModelType.XGBOOST), fit, columns))
    assert covered == pytest.approx(0.9, abs=0.03)


def test_calibration_none_serves_the_models_own_quantile() -> None:
    fit = train_target(
        settings(calibration=Calibration.NONE), Target.TTFT, rows_of(Target.TTFT, 600, 9), empty()
    )
    assert fit.log_offset == 0.0


def test_held_out_rows_score_the_served_answer() -> None:
    test = rows_of(Target.TPOT, 300, 11)
    fit = train_target(settings(), Target.TPOT, rows_of(Target.TPOT, 800, 10), test)
    assert fit.test_samples == 300
    served = served_ms(backend_for(ModelType.XGBOOST), fit, test[0])
    assert fit.metrics["coverage"] == pytest.approx(float(np.mean(test[1] <= served)))
    assert fit.metrics["calibration_log_offset"] == fit.log_offset


def test_a_mean_model_is_served_as_a_calibrated_p90() -> None:
    """objective mean: each candidate's out-of-fold factor turns its mean into a p90."""
    fit = train_target(
        settings(objective_type="mean"),
        Target.TTFT,
        rows_of(Target.TTFT, 2000, 12),
        rows_of(Target.TTFT, 1500, 13),
    )
    assert fit.log_offset > 0.1  # a mean sits far below the p90
    raw_coverage = fit.metrics["raw_coverage"]
    assert raw_coverage is not None and raw_coverage < 0.75
    assert fit.metrics["coverage"] == pytest.approx(0.9, abs=0.04)


def drifting_tpot(n: int, seed: int) -> tuple[Columns, np.ndarray]:
    """TPOT rows whose KV use grows with time (as a pool fills): the oldest 40 % decode
    slowly (10 ms), the next 40 % fast (1 ms), the newest 20 % slowly again, after a change
    the features do not show. Dealt-in-turn folds interpolate between neighbours in time,
    so out of fold the trees look near perfect; fitted on the older rows, they carry the
    fast band forward."""
    columns, _ = rows_of(Target.TPOT, n, seed)
    rng = np.random.default_rng(seed)
    age = np.arange(n) / n
    columns["kv_cache_percentage"] = age
    slow = (age < 0.4) | (age >= 0.8)
    return columns, np.where(slow, 10.0, 1.0) * rng.uniform(0.95, 1.05, n)


@pytest.mark.parametrize("model_type", list(ModelType))
def test_the_level_is_served_where_trees_lose_on_the_newest_rows(
    model_type: ModelType, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = settings(model_type=model_type)
    columns, y = drifting_tpot(1500, 3)
    fit = train_target(s, Target.TPOT, (columns, y), empty())
    # Out of fold the trees win (they interpolate the bands) ...
    trees = [name for name in fit.candidates if name.startswith("trees_")]
    assert min(fit.candidates[t] for t in trees) < fit.candidates[P90.name]
    # ... but fitted on the older rows they carry the fast band into the slow newest rows.
    assert fit.choice == P90.name
    # Without the forward check, out-of-fold loss alone would have served the trees.
    monkeypatch.setattr("training_server.retrain.select.MIN_FORWARD_ROWS", 10**9)
    unchecked = train_target(s, Target.TPOT, (columns, y), empty())
    assert unchecked.choice in trees


@pytest.mark.parametrize("model_type", list(ModelType))
def test_trees_stay_served_when_they_also_win_on_the_newest_rows(model_type: ModelType) -> None:
    s = settings(model_type=model_type)
    fit = train_target(s, Target.TPOT, rows_of(Target.TPOT, 1500, 4), empty())
    assert fit.choice is not None and fit.choice.startswith("trees_")


def doubled_ttft(n: int, seed: int) -> tuple[Columns, np.ndarray]:
    """TTFT rows whose newest 15 % take twice as long with the same features: a pool that
    got slower (a noisy neighbour), which the live factor follows within ~20 rows."""
    columns, y = rows_of(Target.TTFT, n, seed)
    return columns, np.where(np.arange(n) >= int(0.85 * n), 2.0 * y, y)


@pytest.mark.parametrize("model_type", list(ModelType))
def test_after_a_drift_ttfts_forward_check_compares_shapes_not_levels(
    model_type: ModelType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fitted on the older rows, every finalist is at the old level for the newest ones;
    the live factor re-levels whatever is served, so the check must not serve the one that
    missed least by being flat."""
    s = settings(model_type=model_type)
    columns, y = doubled_ttft(1500, 3)
    fit = train_target(s, Target.TTFT, (columns, y), empty())
    trees = [name for name in fit.candidates if name.startswith("trees_")]
    assert min(fit.candidates[t] for t in trees) < 0.9 * fit.candidates[P90_PER_QUEUED.name]
    assert fit.choice in trees
    # With each finalist's own factor from the older rows, the flat level wins the check.
    monkeypatch.setattr("training_server.retrain.target.RELEVELLED_FORWARD_TARGETS", frozenset())
    levelled = train_target(s, Target.TTFT, (columns, y), empty())
    assert levelled.choice == P90_PER_QUEUED.name
