"""The figures after a drift replay's shift (benchmarks.replay.drift_metrics), on hand-made
records whose answers are worked out by hand in the comments."""

from __future__ import annotations

import pytest

from benchmarks.replay.drift import Shift
from benchmarks.replay.drift_metrics import (
    DRIFT_SPAN_S,
    DRIFT_WINDOW_S,
    summarize_drift,
    with_undrifted,
)
from benchmarks.replay.metrics import TargetRecords
from benchmarks.replay.tables import drift_table

Q = 0.9


def records(rows: list[tuple[float, float, float, float]]) -> TargetRecords:
    """(seconds, actual, model, naive_recent) per scored row."""
    out = TargetRecords()
    for i, (at, actual, model, recent) in enumerate(rows):
        out.add(i, actual, model, 1.0, True, naive_recent=recent, seconds=at)
    return out


SHIFT = Shift(2.0, 500, 20.0)
ROWS = [
    (10.0, 100.0, 1.0, 1.0),  # before the shift: a miss of both that must count nowhere
    (20.0, 10.0, 12.0, 5.0),  # model covers (loss 0.1 x 2), naive misses (0.9 x 5)
    (25.0, 10.0, 8.0, 5.0),  # both miss: 0.9 x 2 and 0.9 x 5
    (30.0, 10.0, 11.0, 11.0),  # both cover: 0.1 x 1 each
    (140.0, 10.0, 0.0, 20.0),  # past the first 120 s: its 10 s window only
]


def test_constants_are_the_ones_reported() -> None:
    assert (DRIFT_WINDOW_S, DRIFT_SPAN_S) == (10.0, 120.0)


def test_coverage_per_window_from_the_shift_to_the_end() -> None:
    drift = summarize_drift(records(ROWS), SHIFT, 150.0, Q)
    windows = drift["windows"]
    # [20, 30), [30, 40), ..., [140, 150): 13 windows, 10 of them without rows
    assert [w["from_s"] for w in windows] == [10.0 * i for i in range(13)]
    assert [w["n"] for w in windows] == [2, 1, *[0] * 10, 1]
    assert [w["coverage"] for w in windows] == [0.5, 1.0, *[None] * 10, 0.0]
    assert [w["naive_recent_coverage"] for w in windows] == [0.0, 1.0, *[None] * 10, 1.0]
    assert (drift["shift_s"], drift["shift_row"], drift["factor"]) == (20.0, 500, 2.0)


def test_the_first_span_against_the_recent_naive() -> None:
    span = summarize_drift(records(ROWS), SHIFT, 150.0, Q)["span"]
    assert span["n"] == 3
    assert span["coverage"] == pytest.approx(2 / 3)
    assert span["naive_recent_coverage"] == pytest.approx(1 / 3)
    # model (0.2 + 1.8 + 0.1) / 3 = 0.7; naive (4.5 + 4.5 + 0.1) / 3; ratio 2.1 / 9.1
    assert span["pinball"] == pytest.approx(0.7)
    assert span["naive_recent_pinball"] == pytest.approx(9.1 / 3)
    assert span["pinball_ratio"] == pytest.approx(2.1 / 9.1)


def test_a_replay_ending_early_shortens_the_span_and_the_windows() -> None:
    drift = summarize_drift(records(ROWS[:4]), SHIFT, 35.0, Q)
    assert drift["span_s"] == 15.0 and drift["span"]["n"] == 3
    assert [w["coverage"] for w in drift["windows"]] == [0.5, 1.0]
    assert summarize_drift(records(ROWS), SHIFT, 150.0, Q)["span_s"] == 120.0


def test_no_rows_after_the_shift_is_no_figure_rather_than_a_zero() -> None:
    drift = summarize_drift(records(ROWS[:1]), SHIFT, 21.0, Q)
    assert drift["windows"] == [
        {"from_s": 0.0, "n": 0, "coverage": None, "naive_recent_coverage": None}
    ]
    assert drift["span"]["pinball_ratio"] is None and drift["span"]["coverage"] is None


def test_the_replay_without_the_drift_is_set_beside_each_window_and_printed() -> None:
    """The same rows without the drift (here: the model covering every row) give each
    window its coverage without it, and the span its ratio; the table prints both."""
    drift = summarize_drift(records(ROWS), SHIFT, 150.0, Q)
    calm = [(at, actual, actual, recent) for at, actual, _, recent in ROWS]
    undrifted = summarize_drift(records(calm), Shift(1.0, 500, 20.0), 150.0, Q)
    with_undrifted(drift, undrifted)
    assert [w["undrifted_coverage"] for w in drift["windows"]] == [1.0, 1.0, *[None] * 10, 1.0]
    assert drift["windows"][0]["coverage"] == 0.5  # the drifted figures are kept
    # without the drift the model's loss is 0: ratio 0 against the naive's
    assert drift["span"]["undrifted_pinball_ratio"] == pytest.approx(0.0)
    lines = drift_table({"ttft": {"drift": drift}})
    assert lines[3].startswith("ttft   no drift     1.00 1.00 -")
    assert lines[4].endswith("(no drift 0.00)")
