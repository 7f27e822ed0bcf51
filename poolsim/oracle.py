"""The oracle: routes each request to the pod where the simulator says its TTFT is least.

For every pod it copies the pod's exact current state (queue, running sequences and their
progress, the step in flight, free KV blocks, the encoder cache), adds the request, and
runs the pod's own scheduler and step-time model forward, encoder time included, with no
further arrivals, until the request's first token. It picks the smallest TTFT; ties (e.g.
several idle pods) go to the pod with the fewest requests in flight, then at random. What
it does not know: requests that arrive later (which share steps with this one once it
runs), and prefix-cache evictions during the look-ahead (matches are read at decision
time; block counts are exact otherwise; the encoder cache's copy is exact). It
optimises TTFT only, one request at a time (greedy): it is the reference for TTFT, not a
bound on TPOT or SLO attainment. Look-aheads stop early once they exceed the best TTFT
found so far, trying pods in order of a lower bound on their TTFT, and skip pods whose
bound already exceeds it (both exact: they change the cost, never the choice).
`least_lookahead_ttft` is that search, shared with the decision-regret meter
(poolsim.regret), which asks the same question of every other policy's picks.

In a prefill/decode pool (poolsim.roles) it answers each profile with the same
look-ahead on that profile's pods: the prefill pick by the earliest end of the prompt's
prefill on a prefill pod (its first token there), the decode pick by the least TTFT
the request would have if that decode pod served it whole. The latter ignores that a
split request skips the prefill on its decode pod (and the transfer): a greedy
stand-in, not the best P/D route.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from poolsim.encoder import encode_ms
from poolsim.pod import Pod
from poolsim.policy_api import BasePolicy, PodFeatures, RequestInfo
from poolsim.request import Request

MAX_LOOKAHEAD_STEPS = 200_000
TIE_S = 1e-9  # TTFTs this close count as equal


def ttft_lower_bound(pod: Pod, request: Request, now_s: float) -> float:
    """Seconds the request needs on `pod` at the least: the step in flight, then at least
    one step, and at least the compute time of its own uncached prompt and of the prompt
    tokens that admitted requests (which run first) still have to prefill, plus the
    encoding of its images the pod's encoder cache lacks (only an admission adds to the
    cache, so each of them is encoded on this pod before the first token, by this request
    or one queued ahead of it)."""
    hw = pod.hw
    in_flight = max((pod.step_end_s or now_s) - now_s, 0.0)
    ahead = pod.admitted_prefill_left()
    matched = pod.allocator.match(request)[0] * hw.block_size
    own = request.input_tokens - min(matched, request.input_tokens - 1)
    bound_ms = max(hw.step_floor_ms, hw.ms_per_token * (own + ahead))
    if request.image_ids:
        bound_ms += encode_ms(hw, pod.encoder.missing(request))
    return in_flight + bound_ms / 1000.0


def lookahead_ttft(pod: Pod, request: Request, now_s: float, give_up_s: float) -> float:
    """Seconds from now_s to the request's first token on a copy of `pod` (inf past
    give_up_s)."""
    clone = pod.lookahead_clone()
    seq = clone.submit(request, now_s)
    now = now_s
    if clone.step_end_s is None:
        clone.start_step(now)
    for _ in range(MAX_LOOKAHEAD_STEPS):
        end = clone.step_end_s
        if end is None or end - now_s > give_up_s:
            return float("inf")
        clone.finish_step(end)
        if seq.first_token_s is not None:
            return seq.first_token_s - now_s
        now = end
        clone.start_step(now)
    return float("inf")


@dataclass(slots=True)
class LeastTtft:
    """The least look-ahead TTFT over a pool at one instant."""

    best_s: float  # seconds; inf when no pod reached a first token within the step cap
    ttfts_s: list[float]  # per pod: its exact look-ahead; inf when pruned or given up
    lookaheads: int  # look-aheads run (pods not pruned by their lower bound)


def least_lookahead_ttft(pods: Sequence[Pod], request: Request, now_s: float) -> LeastTtft:
    """The least TTFT any pod would give `request` now, by look-ahead. Pods are tried in
    order of their lower bound; a look-ahead gives up once past the best so far, and the
    search stops at the first bound above it (exact: every pod left out or given up on
    is slower than the best by more than TIE_S)."""
    bounds = [ttft_lower_bound(pod, request, now_s) for pod in pods]
    best = float("inf")
    ttfts = [float("inf")] * len(pods)
    runs = 0
    for index in sorted(range(len(pods)), key=lambda i: (bounds[i], i)):
        if bounds[index] > best + TIE_S:
            break  # sorted: no later pod can do better
        runs += 1
        ttfts[index] = lookahead_ttft(pods[index], request, now_s, best + TIE_S)
        best = min(best, ttfts[index])
    return LeastTtft(best, ttfts, runs)


class OraclePolicy(BasePolicy):
    name = "oracle"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pods: Sequence[Pod] = ()
        self.requests: Mapping[int, Request] = {}
        self.lookaheads = 0

    def attach(self, pods: Sequence[Pod], requests: Mapping[int, Request]) -> None:
        self.pods, self.requests = pods, requests

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        # the pods live now are the first ones (policy_api); in a P/D pool the profile's
        # role's, in pod order
        role = request.profile
        live = [pod for pod in self.pods if pod.role == role][: len(pods)]
        search = least_lookahead_ttft(live, self.requests[request.id], now_s)
        self.lookaheads += search.lookaheads
        best, ttfts = search.best_s, search.ttfts_s
        tied = [i for i in range(len(pods)) if ttfts[i] <= best + TIE_S]
        fewest = min(pods[i].num_request_running for i in tied)
        tied = [i for i in tied if pods[i].num_request_running == fewest]
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)

    def summary(self) -> dict[str, float]:
        return {"lookaheads": float(self.lookaheads)}
