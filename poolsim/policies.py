"""Routing policies without a predictor: random, round-robin, least-requests, heuristic.

- `random`: a pod uniformly at random (seeded).
- `round-robin`: pods in turn (in a P/D pool, each profile's pods in turn).
- `least-requests`: fewest requests in flight (running + waiting); ties at random.
- `heuristic`: llm-d's default scoring profile: 3 x prefix-cache score (matched prefix
  blocks / prompt blocks) + 2 x KV-cache utilisation score (1 - usage) + 2 x queue score
  (waiting requests min-max normalised over the pods: 1 for the shortest queue, 0 for
  the longest, 1 for all when equal); the highest total wins, ties at random. Unlike
  llm-d's approximate prefix scorer (an index of where it routed), it reads each pod's
  true cache, which can only help it.
- `pd-heuristic`: llm-d's sample prefill/decode profiles (poolsim.roles), the same in
  both: 2 x prefix-cache score + 1 x queue score (as above), highest wins, ties at
  random. The role filter is the engine's: each pick sees only that role's pods.

`make_policy(name, seed)` builds any of them, `token-load` (poolsim.token_load: fewest
uncached prompt tokens in flight, behind a prefix-affinity filter), `token-load-per-class`
(the same with each hardware class's own peak prefill rate, and llm-d's multimodal
affinity settings on a workload with images), `oracle`
(poolsim.oracle), `predicted-latency` (poolsim.predicted: llm-d's picker on our real
predictor; knob variants such as `predicted-latency:most:tau=0.8:noslo`, see
poolsim.picker_knobs) and `latency-first` (poolsim.latency_first: our own picker on the same
predictor), and their `-noclass` variants (no `pod_class` in the rows of a mixed pool).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from poolsim.policy_api import BasePolicy, PodFeatures, Policy, PolicyOptions, RequestInfo

WEIGHTS = (3.0, 2.0, 2.0)  # prefix, KV usage, queue: llm-d's default profile
PD_WEIGHTS = (2.0, 1.0)  # prefix, queue: llm-d's sample P/D profiles


def _argmax_random(scores: Sequence[float], rng: random.Random) -> int:
    best = max(scores)
    ties = [index for index, score in enumerate(scores) if score >= best - 1e-12]
    return ties[0] if len(ties) == 1 else rng.choice(ties)


class RandomPolicy(BasePolicy):
    name = "random"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        return self.rng.randrange(len(pods))


class RoundRobinPolicy(BasePolicy):
    name = "round-robin"

    def __init__(self, seed: int) -> None:
        self.next: dict[str, int] = {}  # per profile (P/D: each role's pods in turn)

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        choice = self.next.get(request.profile, 0) % len(pods)
        self.next[request.profile] = choice + 1
        return choice


class LeastRequestsPolicy(BasePolicy):
    name = "least-requests"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        return _argmax_random([-pod.num_request_running for pod in pods], self.rng)


def queue_scores(pods: Sequence[PodFeatures]) -> list[float]:
    """llm-d's queue-scorer: waiting requests min-max normalised, 1 for the shortest
    queue, 0 for the longest, 1 for every pod when all are equal."""
    queues = [pod.num_request_waiting for pod in pods]
    low, high = min(queues), max(queues)
    return [1.0 if high == low else (high - queue) / (high - low) for queue in queues]


def heuristic_scores(pods: Sequence[PodFeatures]) -> list[float]:
    """llm-d's default profile total per pod (see the module docstring)."""
    prefix_w, kv_w, queue_w = WEIGHTS
    scores = []
    for pod, queue_score in zip(pods, queue_scores(pods), strict=True):
        scores.append(
            prefix_w * pod.prefix_cache_score
            + kv_w * (1.0 - pod.kv_cache_percentage)
            + queue_w * queue_score
        )
    return scores


class HeuristicPolicy(BasePolicy):
    name = "heuristic"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        return _argmax_random(heuristic_scores(pods), self.rng)


def pd_heuristic_scores(pods: Sequence[PodFeatures]) -> list[float]:
    """llm-d's sample P/D profile total per pod: 2 x prefix + 1 x queue score."""
    prefix_w, queue_w = PD_WEIGHTS
    return [
        prefix_w * pod.prefix_cache_score + queue_w * queue_score
        for pod, queue_score in zip(pods, queue_scores(pods), strict=True)
    ]


class PdHeuristicPolicy(BasePolicy):
    """`pd-heuristic`, for either profile (it scores whatever pods it is given)."""

    name = "pd-heuristic"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        return _argmax_random(pd_heuristic_scores(pods), self.rng)


def _oracle(options: PolicyOptions) -> Policy:
    from poolsim.oracle import OraclePolicy

    return OraclePolicy(options.seed)


def _token_load(options: PolicyOptions) -> Policy:
    from poolsim.token_load import TokenLoadPolicy

    return TokenLoadPolicy(options.seed)


def _token_load_per_class(options: PolicyOptions) -> Policy:
    from poolsim.token_load import TokenLoadPerClassPolicy

    return TokenLoadPerClassPolicy(options.seed, multimodal=options.multimodal)


def _predicted(options: PolicyOptions) -> Policy:
    from poolsim.predicted import PredictedLatencyPolicy  # loads the HTTP client

    return PredictedLatencyPolicy(options)


def _latency_first(options: PolicyOptions) -> Policy:
    from poolsim.latency_first import LatencyFirstPolicy  # loads the HTTP client

    return LatencyFirstPolicy(options)


def _predicted_noclass(options: PolicyOptions) -> Policy:
    from poolsim.predicted import PredictedLatencyPolicy

    return PredictedLatencyPolicy(options, name="predicted-latency-noclass", pod_class=False)


def _latency_first_noclass(options: PolicyOptions) -> Policy:
    from poolsim.latency_first import LatencyFirstPolicy

    return LatencyFirstPolicy(options, name="latency-first-noclass", pod_class=False)


def _predicted_variant(name: str, options: PolicyOptions) -> Policy:
    from poolsim.picker_knobs import parse
    from poolsim.predicted import PredictedLatencyPolicy

    knobs = parse(name)
    return PredictedLatencyPolicy(
        options, knobs.config, knobs.use_slos, name=name, pod_class=knobs.pod_class
    )


# name -> factory; a policy with a real predictor registers here the same way
FACTORIES: dict[str, Callable[[PolicyOptions], Policy]] = {
    "random": lambda options: RandomPolicy(options.seed),
    "round-robin": lambda options: RoundRobinPolicy(options.seed),
    "least-requests": lambda options: LeastRequestsPolicy(options.seed),
    "heuristic": lambda options: HeuristicPolicy(options.seed),
    # llm-d's sample prefill/decode profiles (poolsim.roles); plain scoring elsewhere
    "pd-heuristic": lambda options: PdHeuristicPolicy(options.seed),
    "token-load": _token_load,
    # token-load with each hardware class's own peak prefill rate (poolsim.token_load)
    "token-load-per-class": _token_load_per_class,
    "predicted-latency": _predicted,
    "latency-first": _latency_first,
    # the same without our pod_class in their rows (what llm-d's EPP sends) in a pool
    # mixing hardware classes (poolsim.predicted)
    "predicted-latency-noclass": _predicted_noclass,
    "latency-first-noclass": _latency_first_noclass,
    "oracle": _oracle,
}


def make_policy(
    name: str, seed: int, speedup: float = 10.0, options: PolicyOptions | None = None
) -> Policy:
    """The named policy; `options` (when given) replaces seed and speedup. A name with knobs
    (`predicted-latency:most:tau=0.8`, poolsim.picker_knobs) is a variant of llm-d's picker."""
    options = options or PolicyOptions(seed=seed, speedup=speedup)
    if ":" in name:
        return _predicted_variant(name, options)
    try:
        factory = FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(FACTORIES)}") from None
    return factory(options)


def check_name(name: str) -> None:
    """ValueError naming the problem when `name` is neither a policy nor a knob variant."""
    if ":" in name:
        from poolsim.picker_knobs import parse

        parse(name)
    elif name not in FACTORIES:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(FACTORIES)}")
