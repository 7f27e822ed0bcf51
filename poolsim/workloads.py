"""Named synthetic workloads; arrival rates scale with the number of pods.

Each is Poisson arrivals of requests drawn from fixed distributions (seeded):

- `chat`: ShareGPT-like chat. Prompts lognormal, median 167 and p90 ~730 tokens (the
  sharegpt-h200 trace's quantiles), 4..2048; outputs lognormal median 200, 1..1024. No
  shared prefixes. SLO: TTFT 500 ms, TPOT 50 ms.
- `prefix`: long documents behind shared system prompts. 12 prefix groups per pod (Zipf
  popularity, s = 0.6), each a fixed 2,000-6,000-token shared prefix; a private suffix
  (median 200 tokens) and outputs median 128 (1..512). The groups' prefixes together are
  about a pod's KV capacity, so where a group is served decides the hit rate.
  SLO: TTFT 1,000 ms, TPOT 60 ms.
- `mixed`: three sizes: short (256 prompt tokens +-25 %, 32 output) 50 %, medium (2,048,
  64) 35 %, long (8,192, 128) 15 %. SLO per size: TTFT 300 / 1,000 / 3,000 ms, TPOT 60 ms.
- `ramp`: `chat` requests with the rate ramping linearly from 1x to 5x at mid-run and
  back to 1x.

RATE_PER_POD holds each workload's arrival rate per pod (requests/s, the 1x rate for
`ramp`), set before any policy was compared from one pod's saturation throughput on the
calibrated `h200` (`python -m benchmarks.bench_poolsim capacity`): chat 12.9 req/s ->
8.0 (62 %); mixed 3.2 -> 2.2 (69 %); prefix 15.8 with its own 12 groups (perfect
affinity) but 3.5 with all 96 groups of 8 pods (no affinity) -> 2.8 (18 % / 81 %: only
where a group is served decides whether the pool copes); ramp 2.6, so the 5x peak is 13
req/s per pod, the chat saturation throughput.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from poolsim.request import Request

RATE_PER_POD = {"chat": 8.0, "prefix": 2.8, "mixed": 2.2, "ramp": 2.6}
GROUPS_PER_POD = 12
RAMP_PEAK = 5.0


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return max(low, min(high, round(median * math.exp(sigma * rng.gauss(0.0, 1.0)))))


def _poisson_times(
    rng: random.Random, rate: Callable[[float], float], peak: float, duration_s: float
) -> list[float]:
    """Arrival times of a Poisson process with intensity rate(t) <= peak (thinning)."""
    times: list[float] = []
    now = 0.0
    while True:
        now += rng.expovariate(peak)
        if now >= duration_s:
            return times
        if rng.random() * peak <= rate(now):
            times.append(now)


def _chat(rng: random.Random, request_id: int, arrival: float) -> Request:
    return Request(
        request_id,
        arrival,
        _lognormal(rng, 167, 1.15, 4, 2048),
        _lognormal(rng, 200, 0.9, 1, 1024),
        slo_ttft_ms=300.0,
        slo_tpot_ms=40.0,
    )


def chat(pods: int, duration_s: float, seed: int) -> list[Request]:
    rng = random.Random(seed)
    rate = RATE_PER_POD["chat"] * pods
    times = _poisson_times(rng, lambda _: rate, rate, duration_s)
    return [_chat(rng, index, t) for index, t in enumerate(times)]


def ramp(pods: int, duration_s: float, seed: int) -> list[Request]:
    rng = random.Random(seed)
    base = RATE_PER_POD["ramp"] * pods

    def rate(t: float) -> float:
        distance = 1.0 - abs(2.0 * t / duration_s - 1.0)  # 0 at the ends, 1 mid-run
        return base * (1.0 + (RAMP_PEAK - 1.0) * distance)

    times = _poisson_times(rng, rate, base * RAMP_PEAK, duration_s)
    return [_chat(rng, index, t) for index, t in enumerate(times)]


def prefix(pods: int, duration_s: float, seed: int) -> list[Request]:
    rng = random.Random(seed)
    groups = GROUPS_PER_POD * pods
    lengths = [rng.randint(2000, 6000) for _ in range(groups)]
    weights = [1.0 / (rank + 1) ** 0.6 for rank in range(groups)]
    rate = RATE_PER_POD["prefix"] * pods
    times = _poisson_times(rng, lambda _: rate, rate, duration_s)
    requests = []
    for index, t in enumerate(times):
        group = rng.choices(range(groups), weights)[0]
        shared = lengths[group]
        prompt = shared + _lognormal(rng, 200, 0.8, 16, 2048)
        requests.append(
            Request(
                index,
                t,
                prompt,
                _lognormal(rng, 128, 0.7, 1, 512),
                prefix_group=group,
                prefix_tokens=shared,
                slo_ttft_ms=1000.0,
                slo_tpot_ms=60.0,
            )
        )
    return requests


MIXED_SIZES = (  # share, prompt tokens, output tokens, TTFT SLO ms
    (0.50, 256, 32, 300.0),
    (0.35, 2048, 64, 1000.0),
    (0.15, 8192, 128, 3000.0),
)


def mixed(pods: int, duration_s: float, seed: int) -> list[Request]:
    rng = random.Random(seed)
    rate = RATE_PER_POD["mixed"] * pods
    times = _poisson_times(rng, lambda _: rate, rate, duration_s)
    shares = [size[0] for size in MIXED_SIZES]
    requests = []
    for index, t in enumerate(times):
        _, prompt, output, slo = rng.choices(MIXED_SIZES, shares)[0]
        tokens = max(1, round(prompt * rng.uniform(0.75, 1.25)))
        requests.append(Request(index, t, tokens, output, slo_ttft_ms=slo, slo_tpot_ms=60.0))
    return requests


WORKLOADS: dict[str, Callable[[int, float, int], list[Request]]] = {
    "chat": chat,
    "prefix": prefix,
    "mixed": mixed,
    "ramp": ramp,
}


def generate(name: str, pods: int, duration_s: float, seed: int) -> list[Request]:
    try:
        make = WORKLOADS[name]
    except KeyError:
        raise ValueError(
            f"unknown workload {name!r}; known: {', '.join(WORKLOADS)} (or a JSONL file)"
        ) from None
    return make(pods, duration_s, seed)
