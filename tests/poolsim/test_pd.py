"""Prefill/decode (P/D) pools: the split path's timing, the decider, the decode pod's KV,
the roles, the per-role figures, and every non-predictor policy in both profiles."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import replace

import pytest

from poolsim.engine import Engine, RunResult
from poolsim.hardware import H200, Hardware
from poolsim.kv_transfer import QWEN3_32B_KV_BYTES_PER_TOKEN, KvTransfer, kv_bytes_per_token
from poolsim.metrics import summarize
from poolsim.pod import Pod
from poolsim.policies import make_policy
from poolsim.policy_api import BasePolicy, Observation, PodFeatures, RequestInfo
from poolsim.request import Completion, Request
from poolsim.roles import DECODE, PREFILL, PdConfig, RolesSpecError, parse_roles
from poolsim.workloads import generate
from tests.poolsim.helpers import SMALL, requests

ROOMY = replace(SMALL, kv_blocks=400)
ROOMY_H200 = replace(H200, kv_blocks=3000)  # the workloads' longest prompts fit


def run_pd(
    reqs: list[Request],
    roles: tuple[str, ...] = (PREFILL, DECODE),
    policy: str = "pd-heuristic",
    threshold: int = 16,
    hw: Hardware = ROOMY,
    regret: bool = True,
) -> RunResult:
    engine = Engine(
        reqs,
        len(roles),
        hw,
        make_policy(policy, 0),
        regret=regret,
        pd=PdConfig(roles, threshold),
    )
    return asyncio.run(engine.run())


def test_kv_bytes_per_token_and_transfer_time() -> None:
    assert QWEN3_32B_KV_BYTES_PER_TOKEN == kv_bytes_per_token(64, 8, 128, 2) == 256 * 1024
    transfer = KvTransfer()
    assert transfer.link_bytes_per_s == 50e9  # one 400 Gb/s NIC (assumed)
    assert transfer.seconds(0) == pytest.approx(transfer.setup_ms / 1000.0)
    expected = transfer.setup_ms / 1000.0 + 256 * 1024 * 1000 / 50e9
    assert transfer.seconds(1000) == pytest.approx(expected)
    assert KvTransfer(bytes_per_token=1000, link_bytes_per_s=1e6, setup_ms=0).seconds(5) == 5e-3


def test_a_split_request_ttft_is_prefill_then_transfer_then_one_decode_step() -> None:
    prompt, output = 200, 5
    result = run_pd(requests([(0.0, prompt, output)]))
    (done,) = result.completions
    hw = ROOMY
    prefill_ms = hw.step_ms(prompt, 0, prompt * (prompt / 2))  # one chunk from 0
    transfer_ms = KvTransfer().seconds(prompt) * 1000.0  # the decode pod held nothing
    first_ms = hw.step_ms(1, 0, 1 * (prompt - 1 + 0.5))  # the last prompt token, one chunk
    assert done.ttft_ms == pytest.approx(prefill_ms + transfer_ms + first_ms + hw.overhead_ms)
    # then decode steps on the decode pod, each reading the KV so far
    steps = [hw.step_ms(1, prompt + k, 0.0) for k in range(output - 1)]
    assert done.tpot_ms == pytest.approx(sum(steps) / len(steps))
    assert (done.prefill_pod, done.pod) == (0, 1)
    prefill, decode = result.pods
    assert prefill.prefill_tokens == prompt and prefill.decode_tokens == 0
    assert decode.prefill_tokens == 1 and decode.decode_tokens == output - 1
    assert result.pd_routes[0].transfer_s == pytest.approx(transfer_ms / 1000.0)


def test_under_the_threshold_the_decode_pod_serves_it_whole() -> None:
    result = run_pd(requests([(0.0, 300, 4), (0.5, 40, 4)]), threshold=512)
    assert result.pods[0].requests_in == 0 and result.pods[0].steps == 0
    assert all(c.prefill_pod is None and c.pod == 1 for c in result.completions)
    assert result.pods[1].prefill_tokens == 340
    # threshold 0: never split, whatever the prompt
    result = run_pd(requests([(0.0, 300, 4)]), threshold=0)
    assert result.pods[0].requests_in == 0


def test_the_decider_reads_the_decode_pods_prefix_cache() -> None:
    # the first request's KV lands on the decode pod with its prefix blocks keyed: the
    # second, of the same prefix group, lacks only 500 - 480 = 20 tokens there
    reqs = requests([(0.0, 500, 2), (1.0, 500, 2)], group=7, prefix=480)
    split = run_pd(reqs, threshold=16)
    assert [c.prefill_pod for c in split.completions] == [0, 0]
    assert split.completions[1].prefix_hit_tokens == 480  # the transfer skipped those
    assert split.pd_routes[1].transfer_s == pytest.approx(KvTransfer().seconds(20))
    whole = run_pd(reqs, threshold=32)
    assert [c.prefill_pod for c in whole.completions] == [0, None]
    assert whole.pods[1].prefill_tokens == 1 + 20  # its last token, then the uncached part


def test_the_decode_pod_takes_blocks_for_the_whole_prompt_and_competes_for_them() -> None:
    pod = Pod(0, SMALL, role=DECODE)  # 64 blocks of 16 tokens
    other = pod.submit(Request(0, 0.0, 300, 50), 0.0)
    ready = pod.submit(Request(1, 0.0, 900, 3), 0.0, kv_ready=True)
    pod.start_step(0.0)
    assert other.blocks_held == math.ceil(256 / 16)  # its first chunk
    assert ready in pod.waiting  # 57 blocks do not fit beside it: it waits its turn
    pod = Pod(1, SMALL, role=DECODE)
    ready = pod.submit(Request(2, 0.0, 900, 3), 0.0, kv_ready=True)
    end = pod.start_step(0.0)
    assert ready.blocks_held == math.ceil(900 / 16) and ready.computed == 899
    assert ready.kv_transferred == 899 and not ready.kv_ready
    assert end is not None
    first, _ = pod.finish_step(end)
    assert first == [ready] and ready.generated == 1 and pod.prefill_tokens == 1


def test_work_is_conserved_across_prefill_transfer_and_decode() -> None:
    reqs = generate("prefix", 4, 8.0, seed=1)
    result = run_pd(reqs, roles=(PREFILL, DECODE, DECODE), hw=ROOMY_H200)
    assert not result.unfinished
    assert sorted(c.request.id for c in result.completions) == sorted(r.id for r in reqs)
    splits = sum(1 for route in result.pd_routes.values() if route.prefill is not None)
    assert splits > 0 and len(result.seqs) == len(reqs) + splits
    for seq in result.seqs:
        put = seq.prefill_computed + seq.prefill_cached + seq.decoded + seq.kv_transferred
        assert put == seq.computed + seq.discarded
    computed = sum(s.prefill_computed for s in result.seqs)
    assert sum(p.prefill_tokens for p in result.pods) == computed
    for pod in result.pods:
        assert pod.allocator.free_blocks() == pod.allocator.total
        assert pod.prefill_pending_tokens == 0 and not pod.running and not pod.waiting
    assert len(result.regrets) == len(reqs)  # one judged pick per request


class Recorder(BasePolicy):
    """Picks the last pod it is shown; remembers the profiles and the roles it saw."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[str, tuple[str, ...]]] = []

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        self.seen.append((request.profile, tuple(p.pod_type for p in pods)))
        return len(pods) - 1


def test_the_policy_sees_the_decode_profile_first_then_the_prefill_one() -> None:
    policy = Recorder()
    roles = (PREFILL, PREFILL, DECODE, DECODE, DECODE)
    engine = Engine(requests([(0.0, 200, 3)]), 5, ROOMY, policy, pd=PdConfig(roles))
    result = asyncio.run(engine.run())
    assert policy.seen == [
        (DECODE, (DECODE, DECODE, DECODE)),
        (PREFILL, (PREFILL, PREFILL)),
    ]
    (done,) = result.completions
    assert (done.prefill_pod, done.pod) == (1, 4)  # the last of each list, mapped back


WITHOUT_PREDICTOR = [
    "pd-heuristic",
    "token-load",
    "heuristic",
    "least-requests",
    "random",
    "round-robin",
    "oracle",
]


@pytest.mark.parametrize("policy", WITHOUT_PREDICTOR)
def test_every_policy_without_a_predictor_runs_on_a_pd_pool(policy: str) -> None:
    reqs = generate("mixed", 4, 6.0, seed=3)
    roles = (PREFILL, DECODE, DECODE, PREFILL)  # roles need not be contiguous
    result = run_pd(reqs, roles=roles, policy=policy, hw=ROOMY_H200)
    assert len(result.completions) == len(reqs)
    for done in result.completions:
        assert roles[done.pod] == DECODE
        assert done.prefill_pod is None or roles[done.prefill_pod] == PREFILL
    by_role = summarize(result)["by_role"]
    assert by_role[DECODE]["share"] == 1.0 and 0.0 < by_role[PREFILL]["share"] <= 1.0
    assert by_role[PREFILL]["tpot_ms"] is None and by_role[DECODE]["tpot_ms"] is not None
    assert by_role[PREFILL]["served_ttft_coverage"] is None


def test_the_oracle_sends_the_prefill_to_the_idle_prefill_pod() -> None:
    reqs = requests([(0.0, 2000, 2), (0.001, 200, 2)])
    result = run_pd(reqs, roles=(PREFILL, PREFILL, DECODE), policy="oracle", hw=ROOMY)
    first, second = sorted(result.completions, key=lambda c: c.request.id)
    assert {first.prefill_pod, second.prefill_pod} == {0, 1}


def test_pd_heuristic_scores_prefix_twice_and_queue_once() -> None:
    def row(prefix: float, waiting: int) -> PodFeatures:
        return PodFeatures(0.0, 100, waiting, waiting, 1, 0, 0, prefix)

    info = RequestInfo(0, 0.0, 100, None, None, profile=DECODE)
    policy = make_policy("pd-heuristic", 0)
    assert policy.choose(info, [row(0.0, 0), row(0.5, 0)], 0.0) == 1  # prefix
    assert policy.choose(info, [row(0.5, 3), row(0.5, 1)], 0.0) == 1  # then queue
    # a prefix score of 0.8 (1.6) beats the shortest queue (1.0)
    assert policy.choose(info, [row(0.8, 4), row(0.0, 0)], 0.0) == 0
    # a 0.4 prefix (0.8) loses to it
    assert policy.choose(info, [row(0.4, 4), row(0.0, 0)], 0.0) == 1


def test_roles_parse_in_pod_order_and_errors_name_roles() -> None:
    assert parse_roles("prefill:2,decode:3", None) == [PREFILL] * 2 + [DECODE] * 3
    assert parse_roles(" decode:1 , prefill:1 ", 2) == [DECODE, PREFILL]
    for spec, says in [
        ("prefill:2", "no decode pods"),
        ("prefill:x,decode:1", "positive integer"),
        ("prefill:0,decode:1", "positive integer"),
        ("gpu:1,decode:1", "unknown role 'gpu'"),
        ("prefill,decode:1", "has no count"),
        ("prefill:1,prefill:1,decode:1", "listed twice"),
    ]:
        with pytest.raises(RolesSpecError, match=says) as caught:
            parse_roles(spec, None)
        assert "--roles" in str(caught.value)
    with pytest.raises(RolesSpecError, match="--roles 'prefill:2,decode:6' has 8 pods but"):
        parse_roles("prefill:2,decode:6", 5)


def test_a_preempted_decode_recomputes_its_transferred_prompt_there() -> None:
    pod = Pod(0, SMALL, role=DECODE)  # 1,024 tokens of KV for three 600-token requests
    seqs = [pod.submit(Request(i, 0.0, 300, 300), 0.0, kv_ready=True) for i in range(3)]
    now = 0.0
    while (end := pod.start_step(now)) is not None:
        pod.finish_step(end)
        now = end
    assert pod.preemptions > 0 and all(seq.done for seq in seqs)
    for seq in seqs:
        put = seq.prefill_computed + seq.prefill_cached + seq.decoded + seq.kv_transferred
        assert put == seq.computed + seq.discarded
    again = [seq for seq in seqs if seq.preemptions]
    assert again and all(seq.prefill_computed > 1 for seq in again)  # computed here, anew
    assert pod.allocator.free_blocks() == pod.allocator.total


def test_split_requests_train_ttft_on_the_prefill_pod_and_tpot_on_the_decode_pod() -> None:
    def row(role: str) -> PodFeatures:
        return PodFeatures(0.0, 100, 0, 0, 1, 0, 0, 0.0, pod_type=role)

    request = Request(3, 0.0, 100, 11)
    split = Completion(request, 2, 0.1, 0.2, 1.2, 200.0, 100.0, 1200.0, 0, 0, prefill_pod=0)
    (ttft,) = Observation(split, row(PREFILL)).training_rows()
    assert ttft["pod_type"] == PREFILL and ttft["actual_ttft_ms"] == 200.0
    (tpot,) = Observation(split, row(DECODE)).training_rows()
    assert tpot["pod_type"] == DECODE and tpot["actual_tpot_ms"] == 100.0
    assert tpot["actual_ttft_ms"] == 0.0 and tpot["num_tokens_generated"] == 11
    whole = replace(split, prefill_pod=None)
    rows = Observation(whole, row(DECODE)).training_rows()
    assert [r["pod_type"] for r in rows] == [DECODE, DECODE]
    assert rows[0]["actual_ttft_ms"] == 200.0 and rows[1]["actual_tpot_ms"] == 100.0
