"""The predicted policy's bookkeeping without servers: served-p90 scores worked out by
hand, and when the model-age guard holds simulated time."""

from __future__ import annotations

import asyncio

import pytest

from latency_client import Prediction
from poolsim.model_age import MAX_TIMEOUTS_IN_A_ROW, ModelAgeGuard
from poolsim.prediction_quality import PRIOR_VERSION, ServedScores, pinball


def test_pinball_weighs_misses_by_q_and_overshoot_by_1_minus_q() -> None:
    assert pinball(100.0, 80.0) == pytest.approx(18.0)  # 0.9 x 20 under
    assert pinball(50.0, 80.0) == pytest.approx(3.0)  # 0.1 x 30 over
    assert pinball(80.0, 80.0) == 0.0


def test_served_scores_by_target_and_after_the_prior() -> None:
    scores = ServedScores()
    scores.routed(PRIOR_VERSION, 0.5)
    scores.completed(PRIOR_VERSION, (80.0, 20.0), ttft_ms=100.0, tpot_ms=10.0)
    for at, version in ((3.0, "v1"), (4.0, "v1"), (14.0, "v2")):
        scores.routed(version, at)
    scores.completed("v1", (80.0, 20.0), ttft_ms=50.0, tpot_ms=None)  # one output token
    figures = scores.figures()
    # TTFT: 100 vs 80 (miss, 18) and 50 vs 80 (covered, 3)
    assert figures["served_ttft_rows"] == 2 and figures["served_ttft_coverage"] == 0.5
    assert figures["served_ttft_pinball_ms"] == pytest.approx(10.5)
    # TPOT: only the request with a second token; 10 vs 20 covered, 0.1 x 10
    assert figures["served_tpot_rows"] == 1 and figures["served_tpot_coverage"] == 1.0
    assert figures["served_tpot_pinball_ms"] == pytest.approx(1.0)
    # after the prior: v1's answer alone
    assert figures["trained_ttft_rows"] == 1 and figures["trained_ttft_coverage"] == 1.0
    assert figures["trained_tpot_rows"] == 0 and "trained_tpot_coverage" not in figures
    assert figures["routed_by_prior"] == 1 and figures["routed_by_first_3_models"] == 3
    assert figures["first_model_at_s"] == 3.0 and figures["model_versions_served"] == 3


def answers(version: str) -> list[Prediction]:
    return [Prediction(100.0, 20.0, version), Prediction(150.0, 25.0, version)]


def test_the_guard_holds_only_for_an_old_model_after_enough_rows() -> None:
    guard = ModelAgeGuard(speedup=10.0, max_age_s=12.0, min_rows=250)
    guard.seen("v1", 5.0)
    assert not guard.due(17.0, completed=1000)  # 12 s old: not more than the limit
    assert not guard.due(30.0, completed=249)  # too few rows for any retrain
    assert guard.due(17.5, completed=250)
    guard.seen("v2", 18.0)
    assert not guard.due(29.0, completed=1000)
    assert not ModelAgeGuard(speedup=10.0, max_age_s=0.0).due(1e6, completed=10**6)


def test_a_hold_returns_the_first_answer_of_a_new_model() -> None:
    guard = ModelAgeGuard(speedup=50.0)
    guard.seen("v1", 0.0)
    replies = iter([answers("v1"), None, answers("v1"), answers("v2")])

    async def ask() -> list[Prediction] | None:
        return next(replies)

    fresh = asyncio.run(guard.hold(ask, 20.0))
    assert fresh == answers("v2") and guard.version == "v2" and guard.since_s == 20.0
    assert guard.holds == 1 and guard.hold_wall_s > 0


def test_holds_give_up_at_the_cap_and_stop_for_a_predictor_that_never_retrains() -> None:
    guard = ModelAgeGuard(speedup=50.0, min_cap_s=0.1, min_rows=0)
    guard.seen("v1", 0.0)

    async def ask() -> list[Prediction] | None:
        return answers("v1")

    now = 0.0
    for _ in range(MAX_TIMEOUTS_IN_A_ROW):
        now += 13.0
        assert guard.due(now, completed=1000)
        assert asyncio.run(guard.hold(ask, now)) is None
        assert guard.since_s == now  # this version serves another max_age_s
    assert not guard.due(now + 100.0, completed=1000)
