"""`latency-first` in the closed loop on our real servers, and llm-d's knob variants of
`predicted-latency` (names parsed into the picker's configuration)."""

from __future__ import annotations

import asyncio

import pytest

from devkit.processes import free_port
from latency_client import PickerConfig
from poolsim.engine import Engine
from poolsim.hardware import H200
from poolsim.latency_first import LatencyFirstPolicy
from poolsim.picker_knobs import parse
from poolsim.policies import check_name, make_policy
from poolsim.policy_api import PolicyOptions
from poolsim.predicted import PredictedLatencyPolicy
from poolsim.workloads import generate


def test_latency_first_learns_in_the_loop_and_routes_on_trained_models() -> None:
    policy = make_policy("latency-first", 0, options=PolicyOptions(seed=4, speedup=10.0))
    assert isinstance(policy, LatencyFirstPolicy)
    requests = generate("chat", 2, 30.0, seed=5)
    result = asyncio.run(Engine(requests, 2, H200, policy, speedup=10.0).run())
    assert len(result.completions) == len(requests) and not result.unfinished
    summary = result.policy_summary
    assert summary["model_versions_served"] >= 2 and summary["fallbacks"] == 0
    # chat has no shared prefix: every pick is cache-less, rotated over the near-best band
    rules = {key for key in summary if key.startswith("rule_")}
    assert rules and all(key.startswith(("rule_least_recent", "rule_starved")) for key in rules)
    assert {done.pod for done in result.completions} == {0, 1}
    assert summary["served_ttft_rows"] > 0 and 0.0 <= summary["served_ttft_coverage"] <= 1.0


def test_latency_first_degrades_to_the_composite_score_with_the_predictor_down() -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    options = PolicyOptions(seed=3, speedup=20.0, training_url=nowhere, prediction_urls=(nowhere,))
    policy = LatencyFirstPolicy(options)
    requests = generate("mixed", 2, 15.0, seed=5)
    result = asyncio.run(Engine(requests, 2, H200, policy, speedup=20.0).run())
    summary = result.policy_summary
    assert summary["fallbacks"] == len(requests) == summary["rule_composite"]
    assert {done.pod for done in result.completions} == {0, 1}


def test_knob_names_become_llm_ds_configuration() -> None:
    assert parse("predicted-latency:").config == PickerConfig()
    knobs = parse("predicted-latency:most:tau=0.8:noslo")
    assert knobs.config.strategy == "most" and not knobs.use_slos
    assert knobs.config.strict_affinity_tau is None and knobs.config.loose_affinity_tau == 0.8
    both = parse("predicted-latency:tau=0.99+0.6").config
    assert (both.strict_affinity_tau, both.loose_affinity_tau) == (0.99, 0.6)
    assert parse("predicted-latency:least").config.strategy == "least"
    policy = make_policy("predicted-latency:most:tau=0.6", 1)
    assert isinstance(policy, PredictedLatencyPolicy) and policy.name.endswith("tau=0.6")
    assert policy.config.strategy == "most" and policy.use_slos
    assert parse("predicted-latency:most").pod_class
    without = make_policy("predicted-latency:most:noclass", 1)
    assert isinstance(without, PredictedLatencyPolicy) and not without.sends_pod_class


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("heuristic:most", "only predicted-latency takes knobs"),
        ("predicted-latency:fast", "unknown knob 'fast'"),
        ("predicted-latency:tau=x", "must be numbers"),
        ("predicted-latency:tau=1.5", r"in \(0, 1\]"),
        ("predicted-latency:tau=0.9+0.8+0.7", "one or two"),
        ("nonesuch", "unknown policy 'nonesuch'"),
    ],
)
def test_bad_policy_names_are_refused_with_the_reason(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_name(name)


def test_the_single_filter_profile_skips_the_strict_filter() -> None:
    import random

    from latency_client import PodState, Prediction, RequestInfo, pick

    # prefix scores 0.9 and 0.0: the strict filter (0.99) keeps both, the loose (0.8) keeps
    # a only; with tau=0.95 alone (no strict filter) both stay and the faster pod b can win
    pods = [PodState("a", prefix_cache_score=0.9), PodState("b")]
    preds = [Prediction(400, 10, "v"), Prediction(100, 10, "v")]
    request = RequestInfo(100)
    loose_only = parse("predicted-latency:tau=0.95").config
    default = PickerConfig()
    rng = random.Random(0)
    assert {pick(request, pods, preds, rng, default).index for _ in range(50)} == {0}
    picks = {pick(request, pods, preds, rng, loose_only).index for _ in range(200)}
    assert picks == {0, 1}
