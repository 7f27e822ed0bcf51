"""token-load-per-class: token-load with each hardware class's own peak prefill rate, in the
affinity gate and in the score (the time a pod needs for its queued uncached tokens and
this request's own)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from poolsim.engine import Engine
from poolsim.hardware import A100, B200, H200
from poolsim.policies import make_policy
from poolsim.policy_api import PodFeatures, RequestInfo
from poolsim.token_load import (
    TokenLoadPerClassPolicy,
    affinity_filter,
    class_peak_tokens_per_s,
    drain_ms,
)
from poolsim.workloads import generate
from tests.poolsim.helpers import queued_features

INFO = RequestInfo(id=0, arrival_s=0.0, input_tokens=1_000, slo_ttft_ms=None, slo_tpot_ms=None)
H200_RATE = 1000.0 / H200.ms_per_token  # ~7,692 tokens/s
B200_RATE = 1000.0 / B200.ms_per_token  # 2.25x that


def pod(tokens: int, pod_class: str, prefix: float = 0.0) -> PodFeatures:
    return queued_features(tokens, prefix, pod_class, INFO.input_tokens)


def choices(pods: list[PodFeatures], times: int = 200, seed: int = 1) -> Counter[int]:
    policy = TokenLoadPerClassPolicy(seed)
    return Counter(policy.choose(INFO, pods, 0.0) for _ in range(times))


def test_each_class_has_its_datasheet_rate() -> None:
    assert class_peak_tokens_per_s("h200") == pytest.approx(H200_RATE)
    assert class_peak_tokens_per_s("b200") == pytest.approx(H200_RATE * 2.25)
    assert class_peak_tokens_per_s("a100") == pytest.approx(H200_RATE / 1.585)
    assert A100.ms_per_token > H200.ms_per_token > B200.ms_per_token
    with pytest.raises(ValueError, match="unknown hardware class"):
        class_peak_tokens_per_s("h100")


def test_drain_time_counts_the_queue_and_the_requests_own_uncached_part() -> None:
    # 7,692 queued tokens at 7,692 tok/s: 1 s; the request's 1,000 tokens, half cached: 65 ms
    waited = drain_ms(pod(round(H200_RATE), "h200", prefix=0.5), 1_000, H200_RATE)
    assert waited == pytest.approx(1000.0 + 500 / H200_RATE * 1000.0, rel=1e-3)


def test_a_faster_pod_wins_with_more_tokens_queued() -> None:
    """Token-load sends this to the h200 (fewer tokens); at each class's own rate the b200
    drains its 2,000 tokens sooner than the h200 its 1,000."""
    pods = [pod(1_000, "h200"), pod(2_000, "b200")]
    assert choices(pods) == Counter({1: 200})
    # With 4,000 queued the b200 needs (4,000 + 1,000) / 2.25 = 2,222 h200-token times,
    # more than the h200's 1,000 + 1,000: the h200 wins again.
    assert choices([pod(1_000, "h200"), pod(4_000, "b200")]) == Counter({0: 200})


def test_idle_pods_go_to_the_fastest_class_and_ties_at_random() -> None:
    assert choices([pod(0, "a100"), pod(0, "h200"), pod(0, "b200")]) == Counter({2: 200})
    got = choices([pod(0, "b200"), pod(0, "h200"), pod(0, "b200")])
    assert set(got) == {0, 2} and min(got.values()) > 50


def test_the_gate_uses_each_pods_own_rate() -> None:
    """A sticky h200 with 150,000 tokens queued: 19.5 s at its rate, 1.5 s more than the
    idle b200 would take plus 18 s; as a b200 (8.7 s) it would stay sticky."""
    sticky_h200 = [pod(150_000, "h200", prefix=1.0), pod(0, "b200")]
    rates = [class_peak_tokens_per_s(p.pod_class) for p in sticky_h200]
    assert affinity_filter(sticky_h200, rates) == [0, 1]
    assert choices(sticky_h200) == Counter({1: 200})
    sticky_b200 = [pod(150_000, "b200", prefix=1.0), pod(0, "h200")]
    rates = [class_peak_tokens_per_s(p.pod_class) for p in sticky_b200]
    assert affinity_filter(sticky_b200, rates) == [0]
    assert choices(sticky_b200) == Counter({0: 200})


def test_on_a_mixed_pool_it_routes_most_to_the_fast_class_and_all_finish() -> None:
    pool = [H200, H200, B200, B200]
    reqs = generate("mixed", len(pool), 60.0, 2)
    result = asyncio.run(
        Engine(reqs, len(pool), pool, make_policy("token-load-per-class", 2)).run()
    )
    assert not result.unfinished
    to_fast = sum(1 for c in result.completions if c.pod >= 2)
    assert len(result.completions) / 2 < to_fast < len(result.completions)
