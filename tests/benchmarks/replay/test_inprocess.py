"""The in-process replay's records (benchmarks.replay.inprocess): both naive p90s and the
replay clock of every scored row, on rows whose actuals count up so the answers are known."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks.replay.inprocess import TargetReplay, trace_columns
from shared.settings import TrainingSettings
from shared.targets import Target

FEATURES = {
    "kv_cache_percentage": 0.1,
    "input_token_length": 100,
    "num_request_waiting": 0,
    "num_request_running": 1,
    "num_tokens_generated": 0,
    "prefix_cache_score": 0.0,
    "prefill_tokens_in_flight": 0,
    "decode_tokens_in_flight": 0,
}


def rows(n: int) -> list[dict[str, Any]]:
    """TTFT 1, 2, ..., n ms; TPOT measured on every other row only."""
    return [
        {**FEATURES, "actual_ttft_ms": float(i + 1), "actual_tpot_ms": 0.0 if i % 2 else 5.0}
        for i in range(n)
    ]


def test_records_carry_the_naive_p90_of_the_newest_500_and_the_batch_time() -> None:
    settings = TrainingSettings(early_retrains=False)
    data = trace_columns(rows(700), Target.TTFT, settings, seed=0)
    replay = TargetReplay(data, Target.TTFT, settings, retrain_every=10**6, batch_seconds=0.5)
    for k in range(7):
        replay.batch(k, np.arange(100 * k, 100 * (k + 1)), warmup=2)
    r = replay.records
    assert len(r.index) == 500 and r.index[0] == 200  # batches 2..6 scored, 100 rows each
    # batch 6 follows TTFT 1..600: the running p90 is 1 + 0.9 x 599, the recent one is of
    # 101..600: 101 + 0.9 x 499; batch 3 (1..300, fewer than 500) has both at 1 + 0.9 x 299
    assert r.naive[-1] == pytest.approx(540.1) and r.naive_recent[-1] == pytest.approx(550.1)
    assert r.naive_recent[100] == pytest.approx(270.1) == r.naive[100]
    assert sorted(set(r.seconds)) == [1.0, 1.5, 2.0, 2.5, 3.0]
    assert r.seconds[0] == 1.0 and r.seconds[-1] == 3.0
