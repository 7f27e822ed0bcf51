"""token-load: fewest uncached prompt tokens in flight, behind the prefix-affinity filter."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace

import pytest

from poolsim.engine import Engine, pod_features
from poolsim.hardware import H200
from poolsim.pod import Pod
from poolsim.policies import make_policy
from poolsim.policy_api import PodFeatures, RequestInfo
from poolsim.token_load import TokenLoadPolicy, affinity_filter, token_load_score
from poolsim.workloads import generate
from tests.poolsim.helpers import SMALL, queued_features, requests, run

INFO = RequestInfo(id=0, arrival_s=0.0, input_tokens=100, slo_ttft_ms=None, slo_tpot_ms=None)
# 0.125 ms per token: a peak prefill rate of 8000 tokens/s, so 144,000 tokens = 18,000 ms
HW = replace(H200, ms_per_token=0.125)
PEAK = 8000.0


def pod(tokens: int, prefix: float = 0.0) -> PodFeatures:
    return queued_features(tokens, prefix)


def choices(pods: list[PodFeatures], times: int = 200, seed: int = 1) -> Counter[int]:
    policy = TokenLoadPolicy(seed)
    policy.attach([Pod(0, HW)], {})
    return Counter(policy.choose(INFO, pods, 0.0) for _ in range(times))


def test_score_is_one_minus_the_share_of_capacity() -> None:
    assert token_load_score(0) == 1.0
    assert token_load_score(2_097_152) == 0.5
    assert token_load_score(4_194_304) == 0.0
    assert token_load_score(10_000_000) == 0.0


def test_fewest_tokens_in_flight_wins() -> None:
    assert choices([pod(500), pod(120), pod(900)]) == Counter({1: 200})


def test_ties_go_at_random_to_either_tied_pod() -> None:
    got = choices([pod(300), pod(100), pod(100)])
    assert set(got) == {1, 2} and min(got.values()) > 50
    assert choices([pod(100), pod(100)], seed=7) == choices([pod(100), pod(100)], seed=7)


def test_sticky_pods_are_kept_although_busier() -> None:
    # sticky: pods 1 (0.9) and 2 (exactly 0.80); pod 3 (0.79) is not
    # best sticky 50,000 tokens = 6,250 ms, best other 1,000 = 125 ms: 6,125 ms <= 18,000
    pods = [pod(1_000), pod(50_000, 0.9), pod(80_000, 0.8), pod(0, 0.79)]
    assert affinity_filter(pods, PEAK) == [1, 2]
    assert choices(pods) == Counter({1: 200})


def test_gate_breaks_stickiness_only_past_18000_ms() -> None:
    # other: 8,000 tokens = 1,000 ms; sticky: 152,000 tokens = 19,000 ms, 18,000 ms more
    at_threshold = [pod(8_000), pod(152_000, 1.0)]
    assert affinity_filter(at_threshold, PEAK) == [1]
    assert choices(at_threshold) == Counter({1: 200})
    # 8 tokens more: 19,001 ms, 18,001 ms more than the other: every pod is kept
    past = [pod(8_000), pod(152_008, 1.0)]
    assert affinity_filter(past, PEAK) == [0, 1]
    assert choices(past) == Counter({0: 200})


def test_no_sticky_pod_keeps_all() -> None:
    pods = [pod(900, 0.5), pod(300, 0.79), pod(600)]
    assert affinity_filter(pods, PEAK) == [0, 1, 2]
    assert choices(pods) == Counter({1: 200})


def test_the_peak_rate_comes_from_the_attached_hardware() -> None:
    policy = TokenLoadPolicy(0)
    with pytest.raises(RuntimeError, match="attach"):
        policy.choose(INFO, [pod(0, 1.0), pod(0)], 0.0)
    policy.attach([Pod(0, HW)], {})
    assert policy.peak_tokens_per_s == pytest.approx(PEAK)


def test_row_sent_to_the_predictor_leaves_the_token_count_out() -> None:
    row = pod(1234, 0.5).row()
    assert "uncached_tokens_in_flight" not in row
    assert row["prefix_cache_score"] == 0.5 and row["pod_type"] == ""


def test_pod_counts_uncached_prompt_tokens_until_the_first_token() -> None:
    first, again, whole = requests([(0.0, 200, 4), (0.0, 200, 4), (0.0, 160, 4)], 7, 160)
    built = Pod(0, SMALL)
    built.submit(first, 0.0)
    assert built.uncached_pending_tokens == 200  # nothing cached yet
    assert pod_features(built, again).uncached_tokens_in_flight == 200
    assert built.lookahead_clone().uncached_pending_tokens == 200
    now = built.start_step(0.0)
    while now is not None and built.uncached_pending_tokens:
        built.finish_step(now)
        now = built.start_step(now)
    assert built.uncached_pending_tokens == 0  # released at the first token
    # the prefix (10 blocks of 16) is cached now: 200 - 160, and at least 1 of 160
    assert built.submit(again, 1.0).uncached_at_dispatch == 40
    assert built.submit(whole, 1.0).uncached_at_dispatch == 1
    assert built.uncached_pending_tokens == 41


def test_a_run_counts_cached_prefixes_and_ends_at_zero() -> None:
    result = run(requests([(0.0, 200, 4), (5.0, 200, 4)], group=3, prefix=160))
    assert [seq.uncached_at_dispatch for seq in result.seqs] == [200, 40]
    assert [p.uncached_pending_tokens for p in result.pods] == [0]


def test_token_load_routes_a_prefix_workload_end_to_end() -> None:
    reqs = generate("prefix", 2, 20.0, 0)
    result = asyncio.run(Engine(reqs, 2, H200, make_policy("token-load", 0)).run())
    assert result.policy == "token-load"
    assert len(result.completions) == len(reqs) and not result.unfinished
    assert all(p.uncached_pending_tokens == 0 for p in result.pods)
