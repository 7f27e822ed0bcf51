"""Rebuild a workload of the rows' shape as poolsim Requests, sized to the time budget.

- Arrivals: a Poisson process whose rate follows the measured requests per minute
  (profile.RateCurve), the whole pool's rate served by the simulated pods. When the
  measured window is longer than the simulated duration, the curve is replayed compressed
  in time (each measured minute lasts 60 / compression simulated seconds at its measured
  rate), so the load level and its shape are kept; a pool of more than MAX_SIM_PODS pods
  is simulated as MAX_SIM_PODS pods at the same rate per pod.
- Sizes: each request takes the prompt length and prefix score of a request row drawn at
  random (so prompts follow the rows' empirical distribution) and an output length drawn
  from the TPOT rows' (independently: stored rows do not link a request's TTFT and TPOT
  rows), or from the assumed model when the rows show none (advisor.profile).
- Prefix reuse: a request whose drawn score is at least REUSE_SCORE shares its first
  score x prompt tokens with a prefix group: GROUPS_PER_POD groups per simulated pod of
  Zipf popularity (s = 0.6), as poolsim's `prefix` workload; the rows do not say how many
  distinct prefixes there were. Whether a pod then has it cached is up to the routing.
- SLOs: the --slo flags on every request, else none.

Size, for a 10,000-row store answered within 2 minutes on one core: enough simulated
seconds for REQUESTS_PER_RUN requests at the mean rate, within [MIN_DURATION_S,
MAX_DURATION_S] and no longer than the measured window; a pool so busy that even
MIN_DURATION_S holds more than MAX_REQUESTS_PER_RUN requests is simulated with fewer pods
(at least MIN_SIM_PODS) at the same rate per pod. The first WARMUP_SHARE of the duration
warms the pool (queues, caches) and is not scored. Paced policies run at a speedup that
puts one run within PACED_WALL_S of wall time, within [MIN_SPEEDUP, MAX_SPEEDUP].
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from advisor.profile import REUSE_SCORE, Profile, output_model, output_tokens, request_mask
from advisor.rows import StoreRows
from poolsim.hardware import Hardware
from poolsim.reconstruct import OutputModel
from poolsim.request import Request
from poolsim.workloads import GROUPS_PER_POD, _poisson_times

REQUESTS_PER_RUN = 1200
MAX_REQUESTS_PER_RUN = 3000
MIN_DURATION_S = 30.0
MAX_DURATION_S = 300.0
WARMUP_SHARE = 0.2
PACED_WALL_S = 6.0
MIN_SPEEDUP, MAX_SPEEDUP = 5.0, 60.0
MAX_SIM_PODS = 16
MIN_SIM_PODS = 4
ZIPF_S = 0.6


@dataclass(frozen=True)
class Plan:
    pods: int  # the pool asked about
    sim_pods: int  # the pods simulated
    rate_scale: float  # simulated / measured rate (sim_pods / pods)
    duration_s: float  # simulated seconds of arrivals
    warmup_s: float  # arrivals before this are not scored
    compression: float  # measured seconds per simulated second (>= 1)
    speedup: float  # simulated seconds per wall second for the paced policies
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None


def sim_pod_count(profile: Profile, pods: int) -> int:
    """The pods simulated: all of them up to MAX_SIM_PODS, fewer for a very busy pool."""
    per_pod_s = max(profile.rate.per_second / pods, 1e-9)
    affordable = math.floor(MAX_REQUESTS_PER_RUN / (per_pod_s * MIN_DURATION_S))
    return min(pods, MAX_SIM_PODS, max(affordable, MIN_SIM_PODS))


def make_plan(
    profile: Profile,
    pods: int,
    slos: tuple[float | None, float | None],
    duration_s: float | None = None,
    speedup: float | None = None,
    min_pods: int = 1,
) -> Plan:
    """The simulation's size (see the module docstring); `duration_s` / `speedup` override;
    at least `min_pods` simulated pods (of --pods): a pod for each hardware class."""
    sim_pods = max(sim_pod_count(profile, pods), min(min_pods, pods))
    scale = sim_pods / pods
    window_s = max(profile.minutes * 60.0, 1.0)
    rate_s = max(profile.rate.per_second * scale, 1e-6)
    auto = min(max(REQUESTS_PER_RUN / rate_s, MIN_DURATION_S), MAX_DURATION_S, window_s)
    duration = duration_s or auto
    pace = speedup or min(max(duration / PACED_WALL_S, MIN_SPEEDUP), MAX_SPEEDUP)
    return Plan(
        pods=pods,
        sim_pods=sim_pods,
        rate_scale=scale,
        duration_s=duration,
        warmup_s=WARMUP_SHARE * duration,
        compression=max(window_s / duration, 1.0),
        speedup=pace,
        slo_ttft_ms=slos[0],
        slo_tpot_ms=slos[1],
    )


@dataclass(frozen=True)
class Sizes:
    """What the requests are drawn from."""

    inputs: np.ndarray  # prompt tokens of the request rows
    scores: np.ndarray  # their prefix scores
    outputs: np.ndarray  # output lengths seen (empty: draw from `model`)
    model: OutputModel  # drawn from when `outputs` is empty


def sizes_of(rows: StoreRows) -> Sizes:
    requests = request_mask(rows) & (rows.input_tokens >= 1)
    return Sizes(
        inputs=rows.input_tokens[requests],
        scores=rows.prefix_score[requests],
        outputs=output_tokens(rows),
        model=output_model(rows),
    )


def _rate(profile: Profile, plan: Plan) -> tuple[list[float], float]:
    """Requests per simulated second per simulated minute-slot, and their peak."""
    per_s = [r / 60.0 * plan.rate_scale for r in profile.rate.per_minute] or [0.0]
    return per_s, max(max(per_s), 1e-6)


def arrivals(profile: Profile, plan: Plan, rng: random.Random) -> list[float]:
    per_s, peak = _rate(profile, plan)
    slot_s = 60.0 / plan.compression

    def rate(t: float) -> float:
        return per_s[min(int(t / slot_s), len(per_s) - 1)]

    return _poisson_times(rng, rate, peak, plan.duration_s)


def _group_weights(groups: int) -> list[float]:
    return [1.0 / (rank + 1) ** ZIPF_S for rank in range(groups)]


def build_requests(
    sizes: Sizes, profile: Profile, plan: Plan, pool: Hardware | Sequence[Hardware], seed: int
) -> list[Request]:
    """The requests of one seed for `pool` (one class, or each pod's class): sized to fit
    every class's max_model_len."""
    classes = [pool] if isinstance(pool, Hardware) else list(pool)
    hw = min(classes, key=lambda c: c.max_model_len)
    rng = random.Random(seed)
    times = arrivals(profile, plan, rng)
    groups = GROUPS_PER_POD * plan.sim_pods
    weights = _group_weights(groups)
    requests = []
    for index, t in enumerate(times):
        pick = rng.randrange(len(sizes.inputs))
        prompt = int(min(sizes.inputs[pick], hw.max_model_len - 1))
        output = _output(sizes, rng, hw.max_model_len - prompt)
        score = float(sizes.scores[pick])
        group, shared = None, 0
        if score >= REUSE_SCORE:
            group = rng.choices(range(groups), weights)[0]
            shared = min(prompt, max(hw.block_size, math.floor(score * prompt)))
        requests.append(
            Request(index, t, prompt, output, group, shared, plan.slo_ttft_ms, plan.slo_tpot_ms)
        )
    return requests


def _output(sizes: Sizes, rng: random.Random, room: int) -> int:
    if len(sizes.outputs):
        drawn = int(sizes.outputs[rng.randrange(len(sizes.outputs))])
    else:
        drawn = sizes.model.draw(rng)
    return max(1, min(drawn, room))
