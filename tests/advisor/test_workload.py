"""The traffic profile and the rebuilt workload, on hand-made rows."""

from __future__ import annotations

import numpy as np

from advisor.profile import profile
from advisor.rows import StoreRows
from advisor.workload import build_requests, make_plan, sizes_of
from poolsim.hardware import H200


def rows(count: int, every_s: float, prompts: np.ndarray, scores: np.ndarray) -> StoreRows:
    """One TTFT row per request, every `every_s` seconds; no TPOT rows."""
    zeros = np.zeros(count)
    return StoreRows(
        timestamp_s=np.arange(count) * every_s,
        input_tokens=prompts,
        tokens_generated=np.ones(count),
        waiting=zeros,
        running=zeros,
        kv_cache=zeros,
        prefix_score=scores,
        prefill_in_flight=zeros,
        ttft_ms=np.full(count, 50.0),
        tpot_ms=zeros,
    )


def test_the_profile_reads_rate_sizes_and_reuse() -> None:
    count = 1200  # one request a second for 20 minutes
    prompts = np.where(np.arange(count) % 10 == 0, 8000.0, 200.0)
    scores = np.where(np.arange(count) % 4 == 0, 0.5, 0.0)
    p = profile(rows(count, 1.0, prompts, scores))
    assert p.request_rows == count and abs(p.minutes - 1199 / 60) < 1e-9
    assert abs(p.rate.mean - 60.0) < 0.1 and len(p.rate.per_minute) == 20
    assert p.input_tokens.p50 == 200 and p.input_tokens.p99 == 8000
    assert p.prefix.reused_share == 0.25 and p.prefix.scores.p50 == 0.5
    assert p.output_source == "assumed"  # no TPOT row carries an output length


def test_the_workload_keeps_the_rate_the_sizes_and_the_reuse() -> None:
    count = 6000  # 5 requests a second for 20 minutes
    prompts = np.where(np.arange(count) % 2 == 0, 20000.0, 300.0)  # half too long for h200
    scores = np.where(np.arange(count) % 5 == 0, 0.8, 0.0)
    stored = rows(count, 0.2, prompts, scores)
    p = profile(stored)
    plan = make_plan(p, pods=32, slos=(500.0, None), duration_s=200.0)
    assert plan.sim_pods == 16 and plan.rate_scale == 0.5  # 16 simulated at the same per-pod rate
    assert abs(plan.compression - 1199.8 / 200.0) < 1e-6
    requests = build_requests(sizes_of(stored), p, plan, H200, seed=3)
    assert 0.85 < len(requests) / (2.5 * 200.0) < 1.15  # 5/s x 0.5 over 200 s
    assert max(r.arrival_s for r in requests) < 200.0
    assert all(r.input_tokens + r.output_tokens <= H200.max_model_len for r in requests)
    assert {r.slo_ttft_ms for r in requests} == {500.0} and {r.slo_tpot_ms for r in requests} == {
        None
    }
    grouped = [r for r in requests if r.prefix_group is not None]
    assert 0.12 < len(grouped) / len(requests) < 0.28
    assert all(r.prefix_tokens == int(0.8 * r.input_tokens) for r in grouped)
    assert build_requests(sizes_of(stored), p, plan, H200, seed=3) == requests  # seeded
