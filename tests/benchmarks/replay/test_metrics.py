"""The replay's second naive p90, of the newest actuals (benchmarks.replay.metrics), and the
ratios against it that every online summary carries beside those against the running p90."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.replay.metrics import (
    RECENT_NAIVE_ROWS,
    TargetRecords,
    recent_naive,
    summarize_online,
)


def test_recent_naive_is_the_quantile_of_the_newest_500_actuals() -> None:
    assert RECENT_NAIVE_ROWS == 500
    seen = [float(v) for v in range(1, 1001)]
    # 501..1000: the 0.9 quantile sits at 0.9 x 499 = 449.1 places past 501
    assert recent_naive(seen, 0.9) == pytest.approx(950.1)
    assert recent_naive(np.asarray(seen), 0.9) == pytest.approx(950.1)
    assert float(np.quantile(seen, 0.9)) == pytest.approx(900.1)  # the running p90, for contrast
    assert recent_naive([4.0, 1.0, 3.0], 0.5) == 3.0  # fewer than 500: all of them


def test_summaries_carry_the_ratio_against_the_recent_naive_beside_the_running_one() -> None:
    records = TargetRecords()
    # rows 0-3, quarters of 1 row each: (actual, model, running naive, recent naive)
    rows = [(10.0, 12.0, 20.0, 11.0), (10.0, 8.0, 20.0, 9.0), (10.0, 10.0, 5.0, 10.5)]
    rows.append((10.0, 14.0, 15.0, 10.0))
    for i, (actual, model, naive, recent) in enumerate(rows):
        records.add(i, actual, model, naive, True, naive_recent=recent, seconds=float(i))
    summary = summarize_online(records, 4, 4, 0.9)
    recent = summary["vs_naive_recent"]
    # pinball losses at 0.9: model 0.2, 1.8, 0, 0.4; recent naive 0.1, 0.9, 0.05, 0;
    # running naive 1, 1, 4.5, 0.5 (a naive loss of 0 leaves the ratio undefined)
    assert recent["windows"][:3] == pytest.approx([2.0, 2.0, 0.0])
    assert recent["windows"][3] is None
    assert recent["overall"] == pytest.approx(2.4 / 1.05)
    assert recent["second_half"] == pytest.approx(0.4 / 0.05)
    assert recent["naive_recent"]["coverage"] == pytest.approx(0.75)
    assert summary["overall"]["pinball_ratio"] == pytest.approx(2.4 / 7.0)  # unchanged meaning
    assert [w["pinball_ratio"] for w in summary["windows"]] == pytest.approx([0.2, 1.8, 0, 0.8])
