"""The drift replay's rows (benchmarks.replay.drift): the trace over again, then every
measured actual times the factor from the halfway row on, features and the trace untouched."""

from __future__ import annotations

from typing import Any

from benchmarks.replay.drift import Shift, drifted, repeated, shift_of, shift_row


def row(ttft: float, tpot: float, tokens: int) -> dict[str, Any]:
    return {"input_token_length": tokens, "actual_ttft_ms": ttft, "actual_tpot_ms": tpot}


def test_repeated_concatenates_copies_in_the_same_order() -> None:
    trace = [row(10, 0, 1), row(20, 2, 2), row(30, 3, 3)]
    out = repeated(trace, 2)
    assert [r["input_token_length"] for r in out] == [1, 2, 3, 1, 2, 3]
    assert out[0] == out[3] and out[0] is not out[3] and out[0] is not trace[0]
    assert repeated(trace, 1) == trace


def test_drift_multiplies_measured_actuals_from_the_halfway_row_on() -> None:
    trace = repeated([row(10, 0, 1), row(20, 2, 2), row(30, 3, 3)], 2)
    out = drifted(trace, 2.5)
    assert shift_row(len(trace)) == 3
    # rows 0-2 untouched; from row 3 on, TTFT and a measured TPOT times 2.5, 0 stays 0
    assert [r["actual_ttft_ms"] for r in out] == [10, 20, 30, 25.0, 50.0, 75.0]
    assert [r["actual_tpot_ms"] for r in out] == [0, 2, 3, 0, 5.0, 7.5]
    assert [r["input_token_length"] for r in out] == [1, 2, 3, 1, 2, 3]
    assert [r["actual_ttft_ms"] for r in trace] == [10, 20, 30, 10, 20, 30]  # the input stays


def test_an_odd_count_shifts_from_the_middle_row_and_a_missing_actual_stays_missing() -> None:
    trace = [row(10, 1, 1), row(10, 1, 2), {"input_token_length": 3, "actual_ttft_ms": 10}]
    out = drifted(trace, 0.5)
    assert [r["actual_ttft_ms"] for r in out] == [10, 5.0, 5.0]
    assert "actual_tpot_ms" not in out[2]


def test_the_shift_is_timed_by_the_batch_that_sends_its_first_row() -> None:
    # 6800 rows, 25 a batch of 1 s: row 3400 leaves in batch 136, at 136 s
    assert shift_of(6800, 2.0, 25, 1.0) == Shift(2.0, 3400, 136.0)
    # 101 rows, 20 a batch of 0.5 s: row 50 is in batch 2 (rows 40-59), at 1 s
    assert shift_of(101, 3.0, 20, 0.5) == Shift(3.0, 50, 1.0)
    assert shift_of(6800, None, 25, 1.0) is None
