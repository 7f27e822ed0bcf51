"""Conformal calibration: coverage on synthetic data with a known distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from latency_cli.synthetic import synthetic_rows
from shared.backends import FitParams, XGBoostBackend
from shared.features import columns_from_dicts
from shared.settings import ObjectiveType
from shared.target_space import TargetSpace
from training_server.calibration import (
    MAX_ABS_LOG_OFFSET,
    conformal_log_offset,
    split_oldest,
)
from training_server.training import fit_target, served_ms


def test_offset_of_a_constant_predictor_is_the_lognormal_quantile() -> None:
    rng = np.random.default_rng(0)
    actual = np.exp(rng.normal(0.0, 1.0, 20_000))  # log-normal: its p90 is e^1.2816
    offset = conformal_log_offset(actual, np.ones_like(actual), 0.9)
    assert offset == pytest.approx(1.2816, abs=0.03)
    fresh = np.exp(rng.normal(0.0, 1.0, 20_000))
    assert np.mean(fresh <= math.exp(offset)) == pytest.approx(0.9, abs=0.01)


@pytest.mark.parametrize("bias", [0.5, 1.0, 2.0])
def test_a_biased_model_is_corrected_to_the_requested_coverage(bias: float) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(10, 1000, 4000)
    actual = x * np.exp(rng.normal(0.0, 0.3, len(x)))
    predicted = bias * x  # right shape, wrong scale
    offset = conformal_log_offset(actual[:2000], predicted[:2000], 0.9)
    coverage = np.mean(actual[2000:] <= predicted[2000:] * math.exp(offset))
    assert coverage == pytest.approx(0.9, abs=0.03)


def test_finite_sample_level_and_limits() -> None:
    assert conformal_log_offset(np.ones(99), np.ones(99), 0.9) == 0.0  # too few rows
    # 100 scores 0.01..1.00 (log space): level ceil(101*0.9)/100 = 91/100 -> the 91st smallest
    actual = np.exp(np.arange(1, 101, dtype=float) / 100)
    assert conformal_log_offset(actual, np.ones(100), 0.9) == pytest.approx(0.91)
    huge = np.exp(np.arange(1, 101, dtype=float))
    assert conformal_log_offset(huge, np.ones(100), 0.9) == MAX_ABS_LOG_OFFSET


def test_split_oldest_keeps_time_order() -> None:
    columns = {"a": np.arange(10.0)}
    (old_cols, old_y), (new_cols, new_y) = split_oldest(columns, np.arange(10.0), 0.3)
    assert old_y.tolist() == [0, 1, 2] and new_cols["a"].tolist() == list(range(3, 10))
    assert old_cols["a"].tolist() == [0, 1, 2] and len(new_y) == 7


def test_fit_target_serves_calibrated_coverage_even_for_a_mean_model() -> None:
    rows = [r for r in synthetic_rows(6000, seed=4) if r["actual_ttft_ms"] > 0]
    columns = columns_from_dicts(rows)
    y = np.array([r["actual_ttft_ms"] for r in rows])
    train, test = split_oldest(columns, y, 0.6)
    names = ("input_token_length", "num_request_waiting", "prefill_tokens_in_flight",
             "prefix_cache_score", "effective_input_tokens")
    params = FitParams(ObjectiveType.MEAN, 0.9, n_estimators=40, max_depth=4)
    fit = fit_target(XGBoostBackend(), params, names, train, test, space=TargetSpace.LOG_MS,
                     min_samples=50)
    # A mean model covers ~50-60 %; the conformal factor lifts it to about 90 %.
    assert fit.metrics["raw_coverage"] < 0.75
    assert fit.log_offset > 0
    assert fit.metrics["coverage"] == pytest.approx(0.9, abs=0.04)


@pytest.mark.parametrize("rows", [5, 40])
def test_too_few_rows_for_trees_serve_their_own_quantile(rows: int) -> None:
    """Below min_samples a target is answered by the p90 of its rows in its space (TTFT per
    queued request), not by the prior formula; below 10 rows by the prior."""
    data = [r for r in synthetic_rows(400, seed=12) if r["actual_ttft_ms"] > 0][:rows]
    columns = columns_from_dicts(data)
    y = np.array([r["actual_ttft_ms"] for r in data])
    names = ("input_token_length", "num_request_waiting")
    params = FitParams(ObjectiveType.QUANTILE, 0.9)
    empty = (columns_from_dicts([]), np.array([]))
    fit = fit_target(XGBoostBackend(), params, names, (columns, y), empty,
                     space=TargetSpace.LOG_MS_PER_QUEUED, min_samples=100)
    if rows < 10:
        assert fit.model is None
        return
    per_queued = np.quantile(np.log(y / (1 + columns["num_request_waiting"])), 0.9)
    served = served_ms(XGBoostBackend(), fit, columns)
    np.testing.assert_allclose(served, np.exp(per_queued) * (1 + columns["num_request_waiting"]),
                               rtol=1e-5)
