"""Each policy does what it is defined to do, on small hand-built states."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Sequence

import pytest

from poolsim.engine import pod_features
from poolsim.oracle import OraclePolicy
from poolsim.pod import Pod
from poolsim.policies import heuristic_scores, make_policy
from poolsim.policy_api import Observation, PodFeatures, RequestInfo
from poolsim.request import Completion, Request
from tests.poolsim.helpers import SMALL

INFO = RequestInfo(id=0, arrival_s=0.0, input_tokens=100, slo_ttft_ms=None, slo_tpot_ms=None)


def pod(running: int = 0, waiting: int = 0, kv: float = 0.0, prefix: float = 0.0) -> PodFeatures:
    return PodFeatures(
        kv_cache_percentage=kv,
        input_token_length=100,
        num_request_waiting=waiting,
        num_request_running=running + waiting,
        num_tokens_generated=1,
        prefill_tokens_in_flight=0,
        decode_tokens_in_flight=0,
        prefix_cache_score=prefix,
    )


def choices(name: str, pods: list[PodFeatures], times: int = 200, seed: int = 1) -> Counter[int]:
    policy = make_policy(name, seed)
    picks = [policy.choose(INFO, pods, 0.0) for _ in range(times)]
    assert all(isinstance(pick, int) for pick in picks)  # these policies answer at once
    return Counter(pick for pick in picks if isinstance(pick, int))


def test_round_robin_cycles() -> None:
    policy = make_policy("round-robin", 0)
    assert [policy.choose(INFO, [pod()] * 3, 0.0) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_random_uses_every_pod_and_is_seeded() -> None:
    got = choices("random", [pod()] * 4, times=400)
    assert set(got) == {0, 1, 2, 3} and min(got.values()) > 50
    assert choices("random", [pod()] * 4, seed=9) == choices("random", [pod()] * 4, seed=9)


def test_least_requests_picks_fewest_running_plus_waiting() -> None:
    pods = [pod(running=3), pod(running=1, waiting=2), pod(running=2), pod(running=5)]
    assert choices("least-requests", pods) == Counter({2: 200})


def test_least_requests_breaks_ties_at_random() -> None:
    got = choices("least-requests", [pod(running=1), pod(running=4), pod(running=1)])
    assert set(got) == {0, 2} and min(got.values()) > 50


def test_heuristic_weights_prefix_3_kv_2_queue_2() -> None:
    # pod 0: full prefix hit but the longest queue and half-full KV: 3 + 1 + 0 = 4
    # pod 1: no hit, empty KV, shortest queue:                       0 + 2 + 2 = 4.0
    # pod 2: half hit, KV 0.25, middle queue:                       1.5 + 1.5 + 1 = 4.0
    pods = [
        pod(waiting=4, kv=0.5, prefix=1.0),
        pod(waiting=0, kv=0.0),
        pod(waiting=2, kv=0.25, prefix=0.5),
    ]
    assert heuristic_scores(pods) == pytest.approx([4.0, 4.0, 4.0])
    assert set(choices("heuristic", pods)) == {0, 1, 2}  # a three-way tie, broken at random
    pods[0] = pod(waiting=4, kv=0.4, prefix=1.0)  # 3 + 1.2 + 0 = 4.2 wins
    assert choices("heuristic", pods) == Counter({0: 200})


def test_heuristic_queue_score_is_one_when_all_queues_are_equal() -> None:
    assert heuristic_scores([pod(waiting=3), pod(waiting=3, kv=0.5)]) == pytest.approx(
        [2.0 + 2.0, 1.0 + 2.0]
    )


def test_unknown_policy_is_named() -> None:
    with pytest.raises(ValueError, match="unknown policy 'fastest'"):
        make_policy("fastest", 0)


def _loaded_pod(index: int, queued_prompts: list[int]) -> Pod:
    built = Pod(index, SMALL)
    for n, tokens in enumerate(queued_prompts):
        built.submit(Request(1000 + n, 0.0, tokens, 50), 0.0)
    built.start_step(0.0)
    return built


def test_oracle_picks_the_pod_with_the_least_simulated_ttft() -> None:
    # pod 0 has one long prompt ahead, pod 1 two short ones, pod 2 three medium ones
    pods = [_loaded_pod(0, [900]), _loaded_pod(1, [60, 60]), _loaded_pod(2, [300] * 3)]
    request = Request(1, 0.0, 200, 10)
    oracle = OraclePolicy(0)
    oracle.attach(pods, {1: request})
    features = [pod_features(p, request) for p in pods]
    free_before = [p.allocator.free_blocks() for p in pods]
    assert oracle.choose(INFO.__class__(1, 0.0, 200, None, None), features, 0.0) == 1
    # the look-ahead left the real pods untouched
    assert [len(p.waiting) + len(p.running) for p in pods] == [1, 2, 3]
    assert [p.allocator.free_blocks() for p in pods] == free_before == [48, 56, 48]


def test_observation_builds_the_epp_training_rows() -> None:
    request = Request(5, 1.0, 100, 11)
    done = Completion(
        request,
        pod=0,
        dispatch_s=1.0,
        first_token_s=1.2,
        finish_s=2.2,
        ttft_ms=200.0,
        tpot_ms=100.0,
        e2e_ms=1200.0,
        prefix_hit_tokens=0,
        preemptions=0,
    )
    ttft_row, tpot_row = Observation(done, pod(running=2)).training_rows()
    assert ttft_row["actual_ttft_ms"] == 200.0 and ttft_row["actual_tpot_ms"] == 0.0
    assert ttft_row["num_tokens_generated"] == 1 and ttft_row["pod_type"] == ""
    assert tpot_row["actual_tpot_ms"] == 100.0 and tpot_row["actual_ttft_ms"] == 0.0
    assert tpot_row["num_tokens_generated"] == 11
    one_token = Completion(request, 0, 1.0, 1.2, 1.2, 200.0, None, 200.0, 0, 0)
    assert len(Observation(one_token, pod()).training_rows()) == 1


def test_an_async_policy_is_awaited_and_told_every_completion() -> None:
    from poolsim.engine import Engine
    from poolsim.policy_api import BasePolicy

    class Remote(BasePolicy):
        name = "remote"

        def __init__(self) -> None:
            self.seen: list[int] = []

        async def _pick(self) -> int:
            await asyncio.sleep(0)
            return 1

        def choose(
            self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float
        ) -> int | Awaitable[int]:
            return self._pick()

        async def _note(self, observation: Observation) -> None:
            self.seen.append(observation.completion.request.id)

        def observe(self, observation: Observation) -> Awaitable[None] | None:
            return self._note(observation)

    policy = Remote()
    reqs = [Request(i, i * 0.1, 50, 3) for i in range(5)]
    result = asyncio.run(Engine(reqs, 2, SMALL, policy, speedup=50.0).run())
    assert sorted(policy.seen) == [0, 1, 2, 3, 4]
    assert [p.requests_in for p in result.pods] == [0, 5]
    assert result.wall_s >= reqs[-1].arrival_s / 50.0  # paced: not faster than 50x


def test_oracle_lookahead_equals_what_the_pod_then_does() -> None:
    from poolsim.oracle import lookahead_ttft

    real = _loaded_pod(0, [500, 120, 700, 40])
    request = Request(1, 0.0, 333, 5)
    predicted = lookahead_ttft(real, request, 0.0, give_up_s=1e9)
    seq = real.submit(request, 0.0)
    now = real.step_end_s
    while seq.first_token_s is None:
        assert now is not None
        real.finish_step(now)
        now = real.start_step(now) or now
    assert predicted == pytest.approx(seq.first_token_s)
