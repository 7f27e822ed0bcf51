"""The live factor's three moves (training_server.retrain.live_factor): the adaptive
conformal step by hand, a shift followed from the newest rows alone (and none found in a
steady state), and the rebase that keeps what is served continuous across a new bundle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.live_calibration import MAX_LIVE_LOG_OFFSET
from training_server.retrain.live_factor import (
    LARGE_SHIFT_HOLD_ROWS,
    SHIFT_ALPHA,
    SHIFT_LENGTHS,
    LiveFactor,
    aci_step,
    binomial_tails,
    conformal_log_offset,
    level_step,
    shift_length,
    steady_misses,
)

Q, STEP, PER = 0.9, 0.005, 12  # ~12 rows of a target a second at the EPP's 25 rows/s
SIGMA = 0.3  # log-normal spread of the actuals around the model


def test_aci_step_by_hand() -> None:
    actual = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0])
    served = np.full(10, 75.0)  # 3 misses (80, 90, 100), 7 hits
    # 0.1 + 0.01 * (3 - 0.1 * 10) = 0.1 + 0.02
    assert aci_step(0.1, actual, served, 0.9, 0.01) == pytest.approx(0.12)
    # all hits: 0 + 0.01 * (0 - 1) = -0.01
    assert aci_step(0.0, actual, np.full(10, 1000.0), 0.9, 0.01) == pytest.approx(-0.01)
    # a miss costs q, a hit 1 - q: 9 hits and 1 miss leave the factor where it was
    assert aci_step(0.3, actual, np.array([1000.0] * 9 + [1.0]), 0.9, 0.05) == pytest.approx(0.3)
    assert aci_step(1.99, actual, np.zeros(10), 0.9, 0.5) == MAX_LIVE_LOG_OFFSET


def test_the_step_is_on_the_quantile_level_never_above_the_configured_one() -> None:
    rng = np.random.default_rng(3)
    wide = rng.normal(0.0, SIGMA, 400)  # TTFT-like: 0.1 of the scores span ~0.2 here
    assert level_step(STEP, wide, Q) == STEP
    narrow = rng.normal(0.0, 0.005, 400)  # decode steps of ~19 ms within 1 %
    width = float(np.quantile(narrow, 0.95) - np.quantile(narrow, 0.85))
    assert level_step(STEP, narrow, Q) == pytest.approx(STEP * width / 0.1)
    assert level_step(STEP, narrow[:99], Q) == STEP  # too few scores to measure a width
    assert level_step(STEP, np.zeros(400), Q) == pytest.approx(STEP * 0.01)  # still moves


def test_a_run_of_misses_on_narrow_scores_moves_the_factor_within_their_spread() -> None:
    """Rows that finish together share their batches and miss together. On scores 1 %
    wide, five misses in a row (too few for a shift) must not carry the factor past the
    distribution: the next request served with it finishes much later, at another level.
    A fixed log step of 0.005 moved it by 0.0225 here, seven times the scores' width."""
    rng = np.random.default_rng(4)
    model = np.full(400, 19.0)
    actual = model * np.exp(rng.normal(0.0, 0.005, 400))
    factor = LiveFactor(Q, STEP)
    for start in range(0, 400, 20):
        served = model[start : start + 20] * math.exp(factor.log_offset)
        factor.observe(actual[start : start + 20], served)
    assert factor.shifts == 0
    width = float(
        np.quantile(np.log(actual / model), 0.95) - np.quantile(np.log(actual / model), 0.85)
    )
    before = factor.log_offset
    factor.observe(np.full(5, 20.0), np.full(5, 19.0 * math.exp(before)))  # 5 misses
    assert factor.shifts == 0
    assert 0.0 < factor.log_offset - before < width


def test_conformal_log_offset_by_hand() -> None:
    scores = np.arange(1.0, 21.0) / 10  # 0.1 .. 2.0 (clamped at 2.0)
    # rank ceil(21 * 0.9) = 19 of 20
    assert conformal_log_offset(scores, 0.9) == pytest.approx(1.9)
    assert conformal_log_offset(np.array([0.5]), 0.9) == pytest.approx(0.5)
    assert conformal_log_offset(np.array([9.0, 9.0]), 0.9) == MAX_LIVE_LOG_OFFSET


def test_a_shift_is_found_only_where_the_misses_say_so() -> None:
    steady = np.log(np.random.default_rng(1).lognormal(0.0, SIGMA, 320))
    offset = conformal_log_offset(steady, Q)
    assert shift_length(steady, offset, Q) == 0
    doubled = np.concatenate([steady, steady[:30] + math.log(2.0)])
    assert shift_length(doubled, offset, Q) >= 20
    halved = np.concatenate([steady, steady[:160] - math.log(2.0)])
    assert shift_length(halved, offset, Q) >= 150  # no misses for that long: too few


def replay(factor: LiveFactor, levels: list[float], seed: int) -> list[float]:
    """Coverage per second of a model right at level 1, served through `factor`, while the
    actuals' level is levels[k] in second k."""
    rng = np.random.default_rng(seed)
    model_p90 = math.exp(1.2816 * SIGMA)
    coverage = []
    for level in levels:
        actual = level * rng.lognormal(0.0, SIGMA, PER)
        served = np.full(PER, model_p90 * math.exp(factor.log_offset))
        coverage.append(float(np.mean(actual <= served)))
        factor.observe(actual, served)
    return coverage


@pytest.mark.parametrize(("scale", "within_s"), [(2.0, 3), (0.5, 14), (1.5, 6)])
def test_a_shift_is_followed_within_seconds(scale: float, within_s: int) -> None:
    """After 60 s at one level the actuals move by `scale`: the factor is at the new level
    `within_s` seconds later, where the adaptive steps alone take a minute or more."""
    factor = LiveFactor(Q, STEP)
    replay(factor, [1.0] * 60, seed=2)
    before = factor.shifts
    replay(factor, [scale] * within_s, seed=3)
    assert factor.shifts > before
    assert factor.log_offset == pytest.approx(math.log(scale), abs=0.2)
    later = replay(factor, [scale] * 60, seed=4)
    assert np.mean(later) == pytest.approx(Q, abs=0.04)
    # The adaptive steps alone, on the same actuals, are still far from the new level.
    slow = replay_steps_only([1.0] * 60 + [scale] * within_s, seed=2)
    assert abs(slow - math.log(scale)) > 0.25


def test_a_burst_that_found_a_shift_does_not_hold_the_factor_up() -> None:
    """One second of requests that finished together through a stall (3x) after a minute
    at one level: the misses are a shift, and the factor follows it. The window that found it
    holds the burst's peak; once the rows after it say the level is back, the factor is
    theirs (BURST_WINDOW_TARGETS: TPOT's factors). With the window kept, as TTFT's are, it
    stays near 3x for as long as the burst is over a tenth of the rows since."""
    for burst_window in (True, False):
        factor = LiveFactor(Q, STEP, burst_window=burst_window)
        replay(factor, [1.0] * 60, seed=2)
        replay(factor, [3.0], seed=3)
        assert factor.shifts == 1
        assert factor.log_offset > math.log(1.5)  # followed at once, as a change would be
        replay(factor, [1.0] * 2, seed=4)
        if not burst_window:
            assert factor.log_offset > math.log(2.0)
            continue
        assert factor.log_offset < 0.3
        later = replay(factor, [1.0] * 10, seed=5)
        assert np.mean(later) == pytest.approx(Q, abs=0.06)


def test_a_large_shift_on_a_burst_is_withdrawn_once_the_rows_after_it_are_back() -> None:
    """The burst of the test above moves the factor far enough for a large shift (the
    retrains and the level would forget every row before it). The rows after the window
    say the level did not change: `large_since` returns to where it was. A doubling that
    lasts keeps its large shift (the test of large shifts below)."""
    factor = LiveFactor(Q, STEP, burst_window=True)
    replay(factor, [1.0] * 60, seed=2)
    replay(factor, [3.0], seed=3)
    assert factor.large_since > 0
    replay(factor, [1.0] * 2, seed=4)
    assert factor.large_since == 0


def replay_steps_only(levels: list[float], seed: int) -> float:
    rng, offset = np.random.default_rng(seed), 0.0
    for level in levels:
        actual = level * rng.lognormal(0.0, SIGMA, PER)
        served = np.full(PER, math.exp(1.2816 * SIGMA + offset))
        offset = aci_step(offset, actual, served, Q, STEP)
    return offset


def test_a_steady_level_is_rarely_taken_for_a_shift() -> None:
    """30 minutes at one level: coverage holds at q, and at most a few false alarms, each
    only re-estimating the factor from rows at the same level."""
    factor = LiveFactor(Q, STEP)
    coverage = replay(factor, [1.0] * 1800, seed=5)
    assert np.mean(coverage) == pytest.approx(Q, abs=0.015)
    assert factor.shifts <= 3
    assert abs(factor.log_offset) < 0.15
    assert factor.large_since == 0  # no false alarm moved it far enough to forget rows


def test_rebase_moves_by_what_the_new_bundle_needs_less() -> None:
    """The old bundle answered 1.65x too low (the factor corrected it); the new one learnt
    1.6x of it: the factor now needs only 1.65 / 1.6, judged at the 0.9 quantile of the
    same rows, so what is served stays where it was."""
    factor = LiveFactor(Q, STEP, log_offset=0.5)
    rng = np.random.default_rng(6)
    old = rng.uniform(10.0, 50.0, 400)
    actual = old * rng.lognormal(0.0, 0.3, 400)
    new = old * 1.6
    move = factor.rebase(old, new, actual)
    assert move == pytest.approx(-math.log(1.6), abs=1e-9)  # the same rows, scaled
    assert factor.log_offset == pytest.approx(0.5 - math.log(1.6), abs=1e-9)
    assert factor.rebase(np.zeros(3), np.ones(3), np.ones(3)) == 0.0  # nothing comparable


def test_rebase_judges_the_tail_not_the_middle() -> None:
    """A new bundle that moved its middle answers up but left the slow rows where they were
    still needs the factor for those: the move is what changed at the quantile served, not
    the median ratio (which would give back 0.4 and leave the tail uncovered)."""
    rng = np.random.default_rng(9)
    old = rng.uniform(10.0, 50.0, 500)
    actual = old * rng.lognormal(0.0, 0.2, 500)
    tail = np.argsort(actual / old)[-100:]  # the slowest fifth, which the p90 is about
    new = old * math.exp(0.4)
    new[tail] = old[tail]
    factor = LiveFactor(Q, STEP, log_offset=0.3)
    move = factor.rebase(old, new, actual)
    assert float(np.median(np.log(new / old))) == pytest.approx(0.4)
    assert move == pytest.approx(0.0, abs=1e-12)
    covered = actual <= new * math.exp(factor.log_offset)
    assert np.mean(covered) >= np.mean(actual <= old * math.exp(0.3))


def test_rebase_can_raise_the_factor_when_the_new_bundle_answers_lower() -> None:
    """A retrain that lowered its answers (its own calibration moved) is made up for by the
    factor, in either direction: served answers stay continuous."""
    factor = LiveFactor(Q, STEP, log_offset=0.0)
    old = np.linspace(10.0, 50.0, 200)
    actual = old * np.linspace(0.5, 1.5, 200)
    move = factor.rebase(old, old * 0.8, actual)
    assert move == pytest.approx(math.log(1.25), abs=1e-9)


def test_rebased_scores_are_judged_against_the_new_bundle() -> None:
    """Scores kept from the old bundle move with it: rows that were covered stay covered
    once the factor and the bundle both moved."""
    factor = LiveFactor(Q, STEP)
    replay(factor, [2.0] * 30, seed=7)  # a shift to 2x: the factor follows
    assert factor.log_offset == pytest.approx(math.log(2.0), abs=0.2)
    # The level starts at one of the 30 slower rows: the window the shift was found in.
    assert 0 < factor.level_since <= 30 - SHIFT_LENGTHS[0] + 1
    before = factor.log_offset
    old = np.full(10, 10.0)
    actual = np.full(10, 10.0 * math.exp(before))  # just covered by old x factor
    factor.rebase(old, old * 2.0, actual)  # the bundle learnt 2x itself
    assert factor.log_offset == pytest.approx(before - math.log(2.0), abs=1e-9)
    later = replay(factor, [1.0] * 30, seed=8)  # the model (now 2x) x factor: right level
    assert np.mean(later) == pytest.approx(Q, abs=0.08)


def test_binomial_tails_by_hand() -> None:
    at_least, at_most = binomial_tails(2, 3, 0.5)  # outcomes of 3 fair coins
    assert at_least == pytest.approx(4 / 8) and at_most == pytest.approx(7 / 8)
    assert binomial_tails(0, 20, 0.1)[1] == pytest.approx(0.9**20)
    assert binomial_tails(20, 20, 0.1)[0] == pytest.approx(0.1**20)
    assert binomial_tails(0, 320, 0.1)[0] == pytest.approx(1.0)


def test_steady_misses_are_where_the_binomial_tails_cross_the_threshold() -> None:
    for n in SHIFT_LENGTHS:
        fewest, most = steady_misses(n, Q)
        assert binomial_tails(fewest, n, 1 - Q)[1] >= SHIFT_ALPHA
        assert fewest == 0 or binomial_tails(fewest - 1, n, 1 - Q)[1] < SHIFT_ALPHA
        assert binomial_tails(most, n, 1 - Q)[0] >= SHIFT_ALPHA
        assert binomial_tails(most + 1, n, 1 - Q)[0] < SHIFT_ALPHA
    assert steady_misses(20, Q) == (0, 10)  # P(X >= 11) = 5e-7 of 20 rows at a 0.1 miss rate


def test_a_large_shift_marks_where_the_new_level_starts_and_a_small_one_does_not() -> None:
    """Rows are numbered from 1 (observe without ids): 60 s of 12 rows at one level, then
    x2. `large_since` is the first row of the new level (within the shortest shift test's
    rows); x1.2 moves the factor too little to forget anything."""
    doubled = LiveFactor(Q, STEP)
    replay(doubled, [1.0] * 60, seed=2)
    assert doubled.large_since == 0
    replay(doubled, [2.0] * 5, seed=3)
    first_new = 60 * PER + 1
    assert first_new - SHIFT_LENGTHS[0] < doubled.large_since <= first_new + PER
    small = LiveFactor(Q, STEP)
    replay(small, [1.0] * 60 + [1.2] * 60, seed=2)
    assert small.large_since == 0


def test_large_shifts_soon_after_keep_the_start_and_later_ones_move_it() -> None:
    """A change that settles in more than one shift keeps its first row, so rows since it
    can accumulate; a large shift more than LARGE_SHIFT_HOLD_ROWS rows later is a new
    change."""
    factor = LiveFactor(Q, STEP)
    replay(factor, [1.0] * 60 + [2.0] * 20, seed=2)
    start = factor.large_since
    replay(factor, [4.0] * 20, seed=3)  # 240 rows later: the same change
    assert factor.large_since == start
    hold_s = LARGE_SHIFT_HOLD_ROWS // PER
    replay(factor, [4.0] * hold_s + [8.0] * 20, seed=4)
    assert factor.large_since > start + LARGE_SHIFT_HOLD_ROWS
