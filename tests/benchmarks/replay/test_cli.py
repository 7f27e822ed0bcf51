"""The drift replay's flags (benchmarks.replay.cli): refused values, and the rows, name and
shift a trace is replayed with."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.replay.cli import parse_args, replay_rows
from benchmarks.replay.drift import Shift


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--drift", "0"], "--drift must be a positive factor, not 0"),
        (["--drift", "-2"], "--drift must be a positive factor, not -2"),
        (["--drift", "nan"], "--drift must be a positive factor, not nan"),
        (["--repeat", "0"], "--repeat must be at least 1"),
        (["--mode", "offline", "--drift", "2"], "--repeat and --drift are for the online"),
        (["--mode", "offline-inprocess", "--repeat", "2"], "--repeat and --drift are for"),
    ],
)
def test_bad_values_are_refused_by_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def rows(n: int) -> list[dict[str, Any]]:
    return [
        {"input_token_length": i, "actual_ttft_ms": 10.0, "actual_tpot_ms": 1.0} for i in range(n)
    ]


def test_repeat_and_drift_give_the_rows_the_name_and_the_shift() -> None:
    args = parse_args(
        ["--mode", "inprocess", "--repeat", "2", "--drift", "3", "--rows-per-batch", "3"]
    )
    name, out, shift = replay_rows("trace", rows(4), args)
    # 8 rows; row 4 is the first shifted one, in batch 1 (rows 3-5) at 1 s
    assert shift == Shift(3.0, 4, 1.0)
    assert name == "trace x2, actuals x3 from row 4"
    assert [r["input_token_length"] for r in out] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [r["actual_ttft_ms"] for r in out] == [10.0] * 4 + [30.0] * 4


def test_without_the_flags_the_trace_is_replayed_as_it_is() -> None:
    trace = rows(4)
    name, out, shift = replay_rows("trace", trace, parse_args([]))
    assert (name, out, shift) == ("trace", trace, None)
    name, out, shift = replay_rows("trace", trace, parse_args(["--repeat", "3"]))
    assert (name, len(out), shift) == ("trace x3", 12, None)
