"""Small hand-built pools and requests for the simulator's tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from poolsim.engine import Engine, RunResult
from poolsim.hardware import H200, Hardware
from poolsim.policies import make_policy
from poolsim.policy_api import PodFeatures
from poolsim.request import Request

SMALL = replace(H200, name="small", kv_blocks=64, max_batched_tokens=256, max_num_seqs=8)


def requests(
    specs: Sequence[tuple[float, int, int]], group: int | None = None, prefix: int = 0
) -> list[Request]:
    """(arrival_s, input, output) triples as requests 0..n-1."""
    return [
        Request(
            i, t, n_in, n_out, prefix_group=group, prefix_tokens=prefix if group is not None else 0
        )
        for i, (t, n_in, n_out) in enumerate(specs)
    ]


def run(
    reqs: Sequence[Request],
    pods: int = 1,
    hw: Hardware = SMALL,
    policy: str = "round-robin",
    seed: int = 0,
) -> RunResult:
    return asyncio.run(Engine(reqs, pods, hw, make_policy(policy, seed)).run())


def queued_features(
    tokens: int, prefix: float = 0.0, pod_class: str = "", input_tokens: int = 100
) -> PodFeatures:
    """An idle-looking pod's row with `tokens` uncached prompt tokens queued (what the
    token-load policies read) and prefix score `prefix`."""
    return PodFeatures(
        kv_cache_percentage=0.0,
        input_token_length=input_tokens,
        num_request_waiting=0,
        num_request_running=0,
        num_tokens_generated=1,
        prefill_tokens_in_flight=0,
        decode_tokens_in_flight=0,
        prefix_cache_score=prefix,
        uncached_tokens_in_flight=tokens,
        pod_class=pod_class,
    )
