"""The served gap (training_server.retrain.served_gap): ACI on the p90s the EPP acted on,
which rows score long after they were served, on top of the live factor that scores them
on arrival."""

from __future__ import annotations

import numpy as np
import pytest

from devkit.synthetic import prediction_row
from shared.features import columns_from_dicts
from shared.live_calibration import MAX_LIVE_LOG_OFFSET
from shared.prior import prior_predict
from shared.targets import Target
from training_server.retrain.live_factor import LiveFactor
from training_server.retrain.served_gap import (
    MAX_LEVEL_GAP,
    MIN_LEVEL_GAP,
    SERVED_STEP_SHARE,
    ServedGap,
    served_by_prior,
)

Q, STEP = 0.9, 0.005
BATCH = 20  # rows arriving per leader step


def lagged_coverage(seed: int, with_gap: bool, rows: int = 20_000, lag: int = 300) -> float:
    """Decode-TPOT-like rows whose level wanders (requests that finish together were decoded
    in the same batches) and that arrive `lag` rows after their p90 was served; the live
    factor scores them on arrival, as the leader does. Returns the share of the second
    half's rows covered by the p90 served for them."""
    rng = np.random.default_rng(seed)
    level = np.zeros(rows)
    for t in range(1, rows):
        level[t] = 0.995 * level[t - 1] + rng.normal(0.0, 0.0005)
    actual = 19.0 * np.exp(level + rng.normal(0.0, 0.002, rows))
    factor, gap = LiveFactor(Q, STEP), ServedGap(Q, STEP)
    served = np.zeros(rows)
    for start in range(0, rows, BATCH):
        now = np.arange(start, min(rows, start + BATCH))
        served[now] = 19.0 * np.exp(factor.log_offset + (gap.log_offset if with_gap else 0.0))
        arrived = now[now >= lag] - lag
        if len(arrived):
            on_arrival = np.full(len(arrived), 19.0 * np.exp(factor.log_offset))
            factor.observe(actual[arrived], on_arrival, arrived + 1)
            if with_gap:
                gap.observe(actual[arrived], served[arrived])
            assert MIN_LEVEL_GAP <= gap.level <= MAX_LEVEL_GAP
    half = np.arange(rows // 2, rows - lag)
    return float(np.mean(actual[half] <= served[half]))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_gap_lifts_what_was_served_towards_the_quantile(seed: int) -> None:
    """On arrival the factor covers ~0.9; of what was served, far less (0.74-0.78 here,
    0.81-0.84 in the simulated chat pool). The gap takes back at least half the shortfall
    within the run (its slow step: 10,000 rows at 0.0005 of level a row)."""
    without, with_gap = lagged_coverage(seed, False), lagged_coverage(seed, True)
    assert without < 0.8
    assert with_gap - without > 0.5 * (Q - without)


def test_served_rows_at_the_quantile_leave_it_at_rest() -> None:
    """No lag: rows served at their true p90 (times the gap) keep the level near 0."""
    rng = np.random.default_rng(5)
    gap = ServedGap(Q, STEP)
    true_p90 = 19.0 * np.exp(0.002 * 1.2816)
    for _ in range(1_000):
        served = np.full(BATCH, true_p90 * np.exp(gap.log_offset))
        gap.observe(19.0 * np.exp(rng.normal(0.0, 0.002, BATCH)), served)
    assert abs(gap.level) < 0.03
    assert abs(gap.log_offset) < 0.002


def test_the_level_moves_from_the_first_row_and_stays_within_its_bounds() -> None:
    gap = ServedGap(Q, STEP)
    gap.observe(np.full(10, 20.0), np.full(10, 19.0))  # 10 misses: up by 10 x 0.9 steps
    assert gap.level == pytest.approx(10 * 0.9 * STEP * SERVED_STEP_SHARE)
    for _ in range(100):
        gap.observe(np.full(100, 20.0), np.full(100, 19.0))
    assert gap.level == MAX_LEVEL_GAP
    for _ in range(1_000):
        gap.observe(np.full(100, 18.0), np.full(100, 19.0))
    assert gap.level == MIN_LEVEL_GAP


def test_a_resumed_gap_serves_what_was_published_until_rows_arrive() -> None:
    gap = ServedGap(Q, STEP, level=0.05, log_offset=0.004)
    assert (gap.level, gap.log_offset) == (0.05, 0.004)
    assert ServedGap(Q, STEP, level=0.5).level == MAX_LEVEL_GAP


@pytest.mark.parametrize("quantile", [0.5, 0.95, 0.99])
def test_any_configured_quantile_is_served_within_zero_and_one(quantile: float) -> None:
    """The raised level never leaves [0, 1] (a p95 raised by 0.09 is not a quantile)."""
    gap = ServedGap(quantile, STEP)
    rng = np.random.default_rng(6)
    for _ in range(50):
        actual = 19.0 * np.exp(rng.normal(0.0, 0.01, 100))
        gap.observe(actual, np.full(100, 18.0))  # every one missed
    assert gap.level == MAX_LEVEL_GAP
    assert gap.log_offset >= 0.0


def test_a_burst_of_stalls_moves_it_no_further_than_any_live_factor() -> None:
    """Scores 100x apart (stalled requests among quick ones) would put the raised quantile
    past what the calibration file accepts (MAX_LIVE_LOG_OFFSET)."""
    gap = ServedGap(Q, STEP)
    served = np.full(1_000, 10.0)
    row = np.arange(1_000)
    # 5 % stalled 1,000x, 10 % just above the p90 served, the rest below it: 15 % missed
    actual = np.where(row % 20 == 0, 10_000.0, np.where(row % 10 == 1, 10.5, 9.0))
    for _ in range(40):
        gap.observe(actual, served)
    assert gap.level == MAX_LEVEL_GAP
    assert gap.log_offset == MAX_LIVE_LOG_OFFSET


def test_rows_the_prior_served_are_told_apart_by_their_value() -> None:
    rows = [prediction_row(num_request_running=n, input_token_length=100 * n) for n in range(6)]
    columns = columns_from_dicts(rows)
    for target in Target:
        prior = prior_predict(target, columns)
        # rows 0-2 served the prior's answer (as JSON carries it back), rows 3-5 a model's,
        # one of which lies within 0.1 % of the prior's
        served = np.concatenate([prior[:3], prior[3:] * np.array([1.3, 0.7, 1.001])])
        assert served_by_prior(target, columns, served).tolist() == [True] * 3 + [False] * 3
        assert not served_by_prior(target, columns, np.full(6, np.nan)).any()
