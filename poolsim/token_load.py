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

On multimodal traffic (`PolicyOptions.multimodal`: the workload's requests carry images)
`token-load-per-class` takes the settings of llm-d's multimodal guides instead: sticky
from a prefix-cache score of 0.6 and a 36,000 ms gap (a request's cacheable part is
mostly its images, so its scores run lower, and token counts do not see the encoder's
cost, so a cold pod costs more than its tokens say). Plain `token-load` keeps llm-d's
default 0.80 and 18,000 ms on every workload.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from poolsim.hardware import hardware
from poolsim.policy_api import BasePolicy, PodFeatures, RequestInfo
from poolsim.request import Request

if TYPE_CHECKING:
    from poolsim.pod import Pod

TOKEN_CAPACITY = 4_194_304  # tokens in flight at which a pod's score bottoms out at 0
AFFINITY_TAU = 0.80  # prefix-cache score from which a pod is sticky
AFFINITY_GAP_MS = 18_000.0  # sticky TTFT guess this far past the best other: not sticky
MULTIMODAL_AFFINITY_TAU = 0.6  # llm-d's multimodal guides, set by hand
MULTIMODAL_AFFINITY_GAP_MS = 36_000.0


def token_load_score(tokens_in_flight: int) -> float:
    """1 for an idle pod, down to 0 at TOKEN_CAPACITY tokens and beyond."""
    return 1.0 - min(1.0, tokens_in_flight / TOKEN_CAPACITY)


def estimated_ttft_ms(tokens_in_flight: int, peak_tokens_per_s: float) -> float:
    """The gate's TTFT guess: the tokens ahead at the pod's peak prefill rate."""
    return tokens_in_flight / peak_tokens_per_s * 1000.0


def affinity_filter(
    pods: Sequence[PodFeatures],
    peak_tokens_per_s: float | Sequence[float],
    tau: float = AFFINITY_TAU,
    gap_ms: float = AFFINITY_GAP_MS,
) -> list[int]:
    """Indices of the pods the scorer may pick from (see the module docstring); the peak
    prefill rate is one for the pool, as llm-d sets it, or one per pod."""
    everyone = list(range(len(pods)))
    rates = (
        [float(peak_tokens_per_s)] * len(pods)
        if isinstance(peak_tokens_per_s, int | float)
        else list(peak_tokens_per_s)
    )
    sticky = [i for i in everyone if pods[i].prefix_cache_score >= tau]
    others = [i for i in everyone if pods[i].prefix_cache_score < tau]
    if not sticky or not others:
        return everyone

    def best(indices: list[int]) -> float:
        return min(estimated_ttft_ms(pods[i].uncached_tokens_in_flight, rates[i]) for i in indices)

    return everyone if best(sticky) - best(others) > gap_ms else sticky


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


class TokenLoadPerClassPolicy(BasePolicy):
    """`token-load-per-class`: token-load as an operator would hand-tune it for a pool of
    several hardware classes if llm-d allowed it, the strongest heuristic we can give a
    mixed pool. Each class's true peak prefill rate (1000 / ms_per_token of the class, read
    once from poolsim.hardware by the `pod_class` label, as an operator would write it into
    the config) replaces the pool's single rate in two places: the affinity gate's TTFT
    guess, and the score, which ranks the pods by the time their queued uncached tokens
    plus this request's own uncached part take at that rate (llm-d's scorer ranks by
    tokens alone, which cannot tell a fast pod from a slow one). Ties at random.
    `multimodal`: the gate takes llm-d's multimodal settings (0.6, 36,000 ms)."""

    name = "token-load-per-class"

    def __init__(self, seed: int, multimodal: bool = False) -> None:
        self.rng = random.Random(seed)
        self.tau, self.gap_ms = (
            (MULTIMODAL_AFFINITY_TAU, MULTIMODAL_AFFINITY_GAP_MS)
            if multimodal
            else (AFFINITY_TAU, AFFINITY_GAP_MS)
        )

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        rates = [class_peak_tokens_per_s(pod.pod_class) for pod in pods]
        kept = affinity_filter(pods, rates, self.tau, self.gap_ms)
        waits = {i: drain_ms(pods[i], request.input_tokens, rates[i]) for i in kept}
        least = min(waits.values())
        tied = [i for i in kept if waits[i] <= least]
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)


def class_peak_tokens_per_s(pod_class: str) -> float:
    """The class's peak prefill rate, tokens/s, from its datasheet-derived constants."""
    return 1000.0 / hardware(pod_class).ms_per_token


def drain_ms(pod: PodFeatures, input_tokens: int, peak_tokens_per_s: float) -> float:
    """The time the pod needs, at its peak rate, for the uncached tokens queued there and
    this request's own uncached prompt (its prefix hit taken off)."""
    own = input_tokens * (1.0 - pod.prefix_cache_score)
    return estimated_ttft_ms(pod.uncached_tokens_in_flight, peak_tokens_per_s) + own / (
        peak_tokens_per_s / 1000.0
    )
