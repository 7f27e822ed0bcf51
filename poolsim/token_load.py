"""`token-load`: llm-d's newer default without a predictor, routing on tokens in flight.

The picker keeps its own count per pod of prompt tokens it sent there that still await
prefill. On dispatch it adds the part of the prompt the pod does not already cache (the
prompt minus the pod's matched prefix blocks times the block size at that moment, always
leaving at least one token); it takes it off again when the request's first token comes
back. (Every simulated request streams, so the first token marks the end of prefill.)
The engine hands this count to policies as `PodFeatures.uncached_tokens_in_flight`.

Each pod scores `1 - min(1, tokens / 4_194_304)`; the best score (the lightest load) wins
and equal scores are settled by the policy's seeded random generator.

Before scoring, a prefix-affinity filter narrows the pods. A pod is sticky when its
prefix-cache score is at least 0.80. With no sticky pod every pod stays. Otherwise a
gate guesses each pod's TTFT, without a predictor, as its tokens in flight over the
pod's peak prefill rate (`1000 / ms_per_token` tokens/s of the simulated hardware, the
only thing this policy reads from the pods, once, in `attach`). When the best sticky
guess is more than 18,000 ms slower than the best non-sticky one, stickiness is dropped
and every pod stays; else only the sticky pods go on to scoring.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from poolsim.policy_api import BasePolicy, PodFeatures, RequestInfo
from poolsim.request import Request

if TYPE_CHECKING:
    from poolsim.pod import Pod

TOKEN_CAPACITY = 4_194_304  # tokens in flight at which a pod's score bottoms out at 0
AFFINITY_TAU = 0.80  # prefix-cache score from which a pod is sticky
AFFINITY_GAP_MS = 18_000.0  # sticky TTFT guess this far past the best other: not sticky


def token_load_score(tokens_in_flight: int) -> float:
    """1 for an idle pod, down to 0 at TOKEN_CAPACITY tokens and beyond."""
    return 1.0 - min(1.0, tokens_in_flight / TOKEN_CAPACITY)


def estimated_ttft_ms(tokens_in_flight: int, peak_tokens_per_s: float) -> float:
    """The gate's TTFT guess: the tokens ahead at the pod's peak prefill rate."""
    return tokens_in_flight / peak_tokens_per_s * 1000.0


def affinity_filter(pods: Sequence[PodFeatures], peak_tokens_per_s: float) -> list[int]:
    """Indices of the pods the scorer may pick from (see the module docstring)."""
    everyone = list(range(len(pods)))
    sticky = [i for i in everyone if pods[i].prefix_cache_score >= AFFINITY_TAU]
    others = [i for i in everyone if pods[i].prefix_cache_score < AFFINITY_TAU]
    if not sticky or not others:
        return everyone

    def best(indices: list[int]) -> float:
        loads = (pods[i].uncached_tokens_in_flight for i in indices)
        return min(estimated_ttft_ms(load, peak_tokens_per_s) for load in loads)

    return everyone if best(sticky) - best(others) > AFFINITY_GAP_MS else sticky


class TokenLoadPolicy(BasePolicy):
    name = "token-load"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.peak_tokens_per_s: float | None = None

    def attach(self, pods: Sequence[Pod], requests: Mapping[int, Request]) -> None:
        self.peak_tokens_per_s = 1000.0 / pods[0].hw.ms_per_token

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        if self.peak_tokens_per_s is None:
            raise RuntimeError("token-load: attach() the pods before choosing")
        kept = affinity_filter(pods, self.peak_tokens_per_s)
        scores = {i: token_load_score(pods[i].uncached_tokens_in_flight) for i in kept}
        top = max(scores.values())
        tied = [i for i in kept if scores[i] == top]
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)
