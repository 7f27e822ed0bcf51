"""The online replay's records and drift figures (benchmarks.replay.online) on stub servers
(httpx's MockTransport): the prior answers every row, the actuals count up."""

from __future__ import annotations

import argparse
import json
from typing import Any

import httpx
import pytest

from benchmarks.replay.drift import shift_of
from benchmarks.replay.online import OnlineRun, TrainedTargets
from shared.prior import PRIOR_VERSION
from shared.targets import Target

from .test_inprocess import rows


def servers(request: httpx.Request) -> httpx.Response:
    """/predict/bulk/strict answers 1 ms for every row; ingestion accepts everything."""
    if request.url.path == "/predict/bulk/strict":
        asked = json.loads(request.content)["requests"]
        answers = [{"ttft_ms": 1.0, "tpot_ms": 1.0} for _ in asked]
        return httpx.Response(200, json={"model_version": PRIOR_VERSION, "predictions": answers})
    return httpx.Response(202, json={})


def test_records_and_the_drift_part_of_a_replay_through_stub_servers() -> None:
    args = argparse.Namespace(rows_per_batch=100, warmup_batches=2, batch_seconds=0.5, windows=4)
    trace = rows(700)
    shift = shift_of(len(trace), 2.0, 100, 0.5)
    run = OnlineRun("t", trace, "http://train", "http://predict", args, 0.9, shift)
    client = httpx.Client(transport=httpx.MockTransport(servers))
    trained_of = TrainedTargets(client, "http://predict")
    for k, batch in enumerate(run.batches):
        run._batch(client, trained_of, k, batch)
    r = run.records[Target.TTFT]
    assert len(r.index) == 500
    assert r.naive[-1] == pytest.approx(540.1) and r.naive_recent[-1] == pytest.approx(550.1)
    assert r.seconds[0] == 1.0 and r.seconds[-1] == 3.0
    tpot = run.records[Target.TPOT]  # TPOT 5 ms on every other row: 50 a batch
    assert len(tpot.index) == 250 and set(tpot.naive_recent) == {5.0}
    drift: dict[str, Any] = run._summary(Target.TTFT)["drift"]
    # row 350 leaves in batch 3 at 1.5 s; the replay ends at 3.5 s: one 10 s window,
    # batches 3-6, where neither a 1 ms answer nor a p90 of smaller actuals covers a row
    assert (drift["shift_s"], drift["span_s"]) == (1.5, 2.0)
    assert drift["windows"] == [
        {"from_s": 0.0, "n": 400, "coverage": 0.0, "naive_recent_coverage": 0.0}
    ]
    assert drift["span"]["n"] == 400
