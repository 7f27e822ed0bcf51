"""Decision regret: 0 for the oracle, the look-ahead gap for a bad pick, per-minute figures."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from poolsim.engine import Engine, RunResult
from poolsim.hardware import H200, Hardware
from poolsim.metrics import pod_share_per_minute, regret_figures, summarize
from poolsim.oracle import least_lookahead_ttft, lookahead_ttft
from poolsim.pod import Pod
from poolsim.policies import make_policy
from poolsim.regret import RegretMeter
from poolsim.request import Request
from poolsim.workloads import generate

# step ms = max(10, prompt tokens + decoding sequences): times by hand
HAND = replace(
    H200,
    name="hand",
    step_floor_ms=10.0,
    ms_per_token=1.0,
    ms_per_kv_ktoken=0.0,
    ms_per_attn_mtoken=0.0,
    overhead_ms=0.0,
    kv_blocks=1000,
    max_batched_tokens=100,
)
SMALL_H200 = replace(H200, kv_blocks=3000)

# round-robin: 0 -> pod 0 (a 1000-token prefill: 10 steps of 100 ms, first token at 1.0 s),
# 1 -> pod 1 (done at 0.01 s), 2 -> pod 0 again although pod 1 is idle
BAD_PICK = [Request(0, 0.0, 1000, 1), Request(1, 0.0, 10, 1), Request(2, 0.05, 50, 1)]


def _run(
    reqs: list[Request], pods: int, hw: Hardware, policy: str, regret: bool = True
) -> RunResult:
    engine = Engine(reqs, pods, hw, make_policy(policy, 0), regret=regret)
    return asyncio.run(engine.run())


def test_round_robin_pays_the_look_ahead_gap_of_its_bad_pick() -> None:
    result = _run(BAD_PICK, 2, HAND, "round-robin")
    assert result.routes == [(0.0, 0), (0.0, 1), (0.05, 0)]
    assert [arrival for arrival, _ in result.regrets] == [0.0, 0.0, 0.05]
    assert result.regrets[0][1] == 0.0 and result.regrets[1][1] == 0.0
    # on pod 0 request 2 waits for the prefill (1.0 s) and then takes one 50 ms step:
    # TTFT 1.0 s; idle pod 1 would have given it that one step, 0.05 s
    assert result.regrets[2][1] == pytest.approx(950.0)
    ttft = {c.request.id: c.ttft_ms for c in result.completions}
    assert ttft[2] == pytest.approx(1000.0)  # the look-ahead was what then happened


def test_the_oracle_picks_the_idle_pod_there_with_no_regret() -> None:
    result = _run(BAD_PICK, 2, HAND, "oracle")
    assert result.routes[2][1] != result.routes[0][1]  # not behind the long prefill
    assert [regret for _, regret in result.regrets] == [0.0, 0.0, 0.0]


def test_the_oracle_regret_is_zero_for_every_pick() -> None:
    reqs = generate("mixed", 4, 30.0, seed=1)
    result = _run(reqs, 4, SMALL_H200, "oracle")
    assert len(result.regrets) == len(reqs)
    assert all(regret == 0.0 for _, regret in result.regrets)
    figures = summarize(result)["regret_ms"]
    assert figures["p50"] == figures["p90"] == figures["mean"] == 0.0
    # the other policies pay for some picks, never a negative regret
    other = _run(reqs, 4, SMALL_H200, "round-robin")
    assert min(r for _, r in other.regrets) >= 0.0 < max(r for _, r in other.regrets)


def test_the_meter_leaves_the_pods_untouched_and_matches_the_look_ahead() -> None:
    pods = [Pod(i, HAND) for i in range(3)]
    for pod, prompt in zip(pods, (700, 200, 400), strict=True):
        pod.submit(Request(100 + pod.index, 0.0, prompt, 5), 0.0)
        pod.start_step(0.0)
    request = Request(7, 0.02, 120, 3)
    before = [
        (len(p.waiting), len(p.running), p.allocator.free_blocks(), p.step_end_s) for p in pods
    ]
    meter = RegretMeter()
    regret = meter.measure(pods, request, 0, 0.02)
    after = [
        (len(p.waiting), len(p.running), p.allocator.free_blocks(), p.step_end_s) for p in pods
    ]
    assert before == after
    exact = [lookahead_ttft(p, request, 0.02, float("inf")) for p in pods]
    assert least_lookahead_ttft(pods, request, 0.02).best_s == min(exact)
    assert regret == pytest.approx((exact[0] - min(exact)) * 1000.0)
    assert meter.regrets == [(0.02, regret)]


def test_regret_figures_by_minute_of_arrival() -> None:
    figures = regret_figures([(0.0, 0.0), (30.0, 10.0), (59.9, 20.0), (150.0, 5.0)])
    assert figures["mean"] == pytest.approx(8.75) and figures["p50"] == pytest.approx(7.5)
    minutes = figures["per_minute"]
    assert [(m["minute"], m["picks"]) for m in minutes] == [(0, 3), (1, 0), (2, 1)]
    assert minutes[0]["p50"] == 10.0 and minutes[0]["mean"] == pytest.approx(10.0)
    assert minutes[0]["p90"] == pytest.approx(18.0)
    assert minutes[1]["p50"] is minutes[1]["p90"] is minutes[1]["mean"] is None
    assert minutes[2]["p50"] == minutes[2]["p90"] == minutes[2]["mean"] == 5.0
    assert regret_figures([]) == {"p50": None, "p90": None, "mean": None, "per_minute": []}


def test_pod_share_per_minute_of_arrival() -> None:
    routes = [(1.0, 0), (2.0, 1), (3.0, 1), (59.0, 1), (125.0, 2)]
    assert pod_share_per_minute(routes, 3) == [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0], [0, 0, 1.0]]
    assert pod_share_per_minute([], 3) == []


def test_without_regret_the_figures_are_none_and_the_routes_the_same() -> None:
    reqs = generate("prefix", 3, 20.0, seed=2)
    off = _run(reqs, 3, SMALL_H200, "heuristic", regret=False)
    on = _run(reqs, 3, SMALL_H200, "heuristic")
    assert off.regrets == [] and len(on.regrets) == len(reqs)
    assert off.routes == on.routes  # measuring never changes a run
    metrics = summarize(off)
    assert metrics["regret_ms"] == {"p50": None, "p90": None, "mean": None, "per_minute": []}
    assert metrics["pod_share_per_minute"] == summarize(on)["pod_share_per_minute"]
    assert len(metrics["pod_share_per_minute"]) == 1
    assert sum(metrics["pod_share_per_minute"][0]) == pytest.approx(1.0)


def test_ttft_per_minute_groups_completions_by_arrival_minute() -> None:
    from poolsim.metrics import ttft_per_minute
    from poolsim.request import Completion, Request

    def done(arrival_s: float, ttft_ms: float) -> Completion:
        request = Request(0, arrival_s, 10, 1)
        return Completion(request, 0, arrival_s, arrival_s, arrival_s, ttft_ms, None, 0.0, 0, 0)

    minutes = ttft_per_minute([done(1.0, 10.0), done(59.0, 30.0), done(130.0, 7.0)])
    assert [m["p50"] for m in minutes] == [20.0, None, 7.0]  # minute 1 had no arrival
    assert minutes[0]["p90"] == pytest.approx(28.0)  # 10 + 0.9 x (30 - 10)
