"""The oracle: routes each request to the pod where the simulator says its TTFT is least.

For every pod it copies the pod's exact current state (queue, running sequences and their
progress, the step in flight, free KV blocks), adds the request, and runs the pod's own
scheduler and step-time model forward, with no further arrivals, until the request's first
token. It picks the smallest TTFT; ties (e.g. several idle pods) go to the pod with the
fewest requests in flight, then at random. What it does not know: requests that arrive
later (which share steps with this one once it runs), and prefix-cache evictions during
the look-ahead (matches are read at decision time; block counts are exact otherwise). It
optimises TTFT only, one request at a time (greedy): it is the reference for TTFT, not a
bound on TPOT or SLO attainment. Look-aheads stop early once they exceed the best TTFT
found so far, trying pods in order of a lower bound on their TTFT, and skip pods whose
bound already exceeds it (both exact: they change the cost, never the choice).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from poolsim.pod import Pod
from poolsim.policy_api import BasePolicy, PodFeatures, RequestInfo
from poolsim.request import Request

MAX_LOOKAHEAD_STEPS = 200_000


def ttft_lower_bound(pod: Pod, request: Request, now_s: float) -> float:
    """Seconds the request needs on `pod` at the least: the step in flight, then at least
    one step, and at least the compute time of its own uncached prompt and of the prompt
    tokens that admitted requests (which run first) still have to prefill."""
    hw = pod.hw
    in_flight = max((pod.step_end_s or now_s) - now_s, 0.0)
    ahead = pod.admitted_prefill_left()
    matched = pod.pool.match(request)[0] * hw.block_size
    own = request.input_tokens - min(matched, request.input_tokens - 1)
    return in_flight + max(hw.step_floor_ms, hw.ms_per_token * (own + ahead)) / 1000.0


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
        full = self.requests[request.id]
        bounds = [ttft_lower_bound(pod, full, now_s) for pod in self.pods]
        order = sorted(range(len(pods)), key=lambda i: (bounds[i], i))
        best = float("inf")
        ttfts = [float("inf")] * len(pods)
        for index in order:
            if bounds[index] > best + 1e-9:
                break  # sorted: no later pod can do better
            self.lookaheads += 1
            ttft = lookahead_ttft(self.pods[index], full, now_s, best + 1e-9)
            ttfts[index] = ttft
            best = min(best, ttft)
        tied = [i for i in range(len(pods)) if ttfts[i] <= best + 1e-9]
        fewest = min(pods[i].num_request_running for i in tied)
        tied = [i for i in tied if pods[i].num_request_running == fewest]
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)

    def summary(self) -> dict[str, float]:
        return {"lookaheads": float(self.lookaheads)}
