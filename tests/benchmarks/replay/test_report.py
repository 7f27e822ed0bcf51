"""The drift table of `benchmarks.replay.report`: one row per trace, target and run of a
drift replay, none for a replay without a shift."""

from __future__ import annotations

from typing import Any

from benchmarks.replay.report import drift_rows


def summary(drift: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"overall": {}}
    if drift:
        out["drift"] = {
            "shift_s": 136.0,
            "windows": [
                {"coverage": 0.5, "naive_recent_coverage": 0.25},
                {"coverage": None, "naive_recent_coverage": None},
                {"coverage": 0.9, "naive_recent_coverage": 0.87},
            ],
            "span": {"coverage": 0.81, "naive_recent_coverage": 0.75, "pinball_ratio": 0.8},
        }
    return out


def test_one_row_per_trace_target_and_run_with_a_shift() -> None:
    traces = [
        {"trace": "t x2", "seed": 3, "run": 1, "targets": {"ttft": summary(True)}},
        {"trace": "t x2", "run": 2, "targets": {"tpot": summary(True)}},
        {"trace": "t", "run": 1, "targets": {"ttft": summary(False)}},
    ]
    rows = drift_rows(traces)
    assert rows == [
        "| t x2 TTFT | seed 3 | 136 s | 0.50 - 0.90 | 0.25 - 0.87 | 0.810 | 0.750 | 0.80 |",
        "| t x2 TPOT | run 2 | 136 s | 0.50 - 0.90 | 0.25 - 0.87 | 0.810 | 0.750 | 0.80 |",
    ]
