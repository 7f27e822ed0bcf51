"""`latency-first`: our own picker, beside llm-d's (`pick`, left unchanged).

It sends each request to the pod with the lowest predicted TTFT, among the pods predicted to
meet the request's SLOs when any are. llm-d's scorer instead prefers the pod with the *least*
headroom that still fits (best fit) and then draws at random in proportion to the score: it
packs requests up to their SLO, which costs latency no SLO asked for, and on prefix-heavy
traffic it spreads a group over every pod that holds its prefix. The rules, in order:

1. **Predictor down** (no predictions): llm-d's composite score (free KV, queue shortness,
   prefix score) and its weighted-random pick, exactly as llm-d degrades.
2. **Feasible tier**: pods predicted to meet both SLOs; else those meeting the TTFT SLO;
   else all. A target without an SLO counts as met (llm-d counts it as 0 ms). Meeting only
   the TPOT SLO earns no preference: those are the pods with few running requests, often
   behind a long queue of prompts, and a request sent there waits seconds for its first
   token to save milliseconds per token.
3. **Prefix affinity**: when a feasible pod holds the prompt's prefix (prefix score >=
   `affinity_tau`), the group stays there (the fastest such pod) unless a pod without the
   prefix is predicted faster by more than `affinity_slack` (a share of the sticky pod's
   TTFT). The prediction already charges a cold pod the full prefill; the slack stands for
   what the prediction cannot see: a second copy of the prefix evicts other groups there.
4. **No cache hit anywhere** (every prefix score is 0): among the feasible pods predicted
   within `near_best` of the fastest (p90 predictions are that noisy; a band, not a tie),
   the least recently picked one. New prefix groups and cache-less traffic so go to pods
   that have had none lately, and a cold pod keeps getting traffic.
5. **Starvation bound**: on such a request, a feasible pod of the fastest pod's hardware
   class (`pod_class`; "" for all where the rows carry none) that has not been picked for
   `starve_after_picks_per_pod` x pods picks joins the band even when predicted slower. It
   breaks the loop "no cache, so predicted slow, so never picked, so no cache" while
   costing at most one request per starved pod per that many picks. A pod of a slower
   class is not starved: it is slower, not cold, and still gets the requests for which it
   comes within the band (a class that joins or recovers so gets rows). Starving each pod
   of the slower classes cost chat pools of two and three classes 3-6 % of TTFT p90
   (benchmarks/README.md, "pods of a slower class no longer starve").
6. Otherwise: the fastest feasible pod (ties: least recently picked).
7. **Warm-up**: while the answers come from a model that has learned nothing yet
   (`unlearned_versions`: our servers' cold-start prior, a fixed formula that charges every
   queued prompt in full, cached prefix included, and 200 ms per queued request), they are
   not a measurement of this pool: every pod counts as feasible, a prefix group is never
   split, and "fastest" means the fewest prompt tokens in flight (the picker's own count,
   as llm-d's token-load scorer uses), with rules 4-5 as above. So is a version whose
   model of the ranking target has no split (`ttft_model_splits` 0; the decode profile:
   `tpot_model_splits`): the trainer serves the running p90 (one value for every pod) or
   the p90 per queued request (a queue count, blind to prompt sizes) until trees beat it,
   on the first few dozen rows and wherever trees lose later. The first trained version
   (a running p90 where we looked) ranked pods worst of all in the simulator (per-pick
   regret on `mixed` 388 ms on average, against 18 ms for the token count).
   `warmup_models` more trained versions may count as warm-up too (default none: counting
   three versions instead cost chat pools 5-8 % of their first minute's TTFT p90;
   benchmarks/README.md).

State: the picker remembers when it last sent a request to each pod (by pod name) and the
model versions it has seen, so one instance serves one pool. Deterministic: no random
draw outside the composite fallback.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from latency_client._headroom import buffered_tpot_slo
from latency_client._picker import Pick
from latency_client._scoring import composite_scores, weighted_pick
from latency_client._types import PodState, Prediction, RequestInfo


@dataclass(frozen=True)
class LatencyFirstConfig:
    affinity_tau: float = 0.80  # llm-d's loose affinity threshold
    affinity_slack: float = 0.5  # a cold pod must be predicted > 50 % faster to split a group
    near_best: float = 0.10  # relative band of "as fast as the fastest" for cache-less requests
    near_best_ms: float = 5.0  # and an absolute floor for it (short prompts, ~tens of ms)
    starve_after_picks_per_pod: int = 4
    slo_buffer_factor: float = 1.0
    unlearned_versions: tuple[str, ...] = ("cold-start-prior",)
    warmup_models: int = 0  # trained versions with splits still counted as warm-up


def check_candidates(
    pods: Sequence[PodState], predictions: Sequence[Prediction | None] | None
) -> None:
    """The arguments every picker takes: some pods, and one prediction per pod if any."""
    if not pods:
        raise ValueError("no candidate pods")
    if predictions is not None and len(predictions) != len(pods):
        raise ValueError(f"{len(predictions)} predictions for {len(pods)} pods")


def composite_pick(pods: Sequence[PodState], rng: random.Random) -> Pick:
    """Predictor down: llm-d's composite score and its weighted-random pick."""
    scores = composite_scores(pods)
    index = weighted_pick(scores, rng)
    return Pick(pods[index], index, None, scores[index], "composite")


@dataclass(frozen=True, slots=True)
class _Option:
    index: int
    pod: PodState
    prediction: Prediction
    tier: int  # 0: meets both SLOs, 1: the TTFT SLO only, 2: not the TTFT SLO
    cost: float  # what "fastest" minimises: the predicted TTFT (warm-up: tokens in flight)
    learned: bool  # False: the answer came from an unlearned model (warm-up)


class LatencyFirstPicker:
    """One pool's picker: `pick` per request (same arguments as latency_client.pick)."""

    def __init__(self, config: LatencyFirstConfig | None = None) -> None:
        self.config = config or LatencyFirstConfig()
        self._picks = 0
        self._last_pick: dict[str, int] = {}  # pod name -> pick number of its last request
        self._versions: set[str] = set()  # trained model versions seen answering

    def pick(
        self,
        request: RequestInfo,
        pods: Sequence[PodState],
        predictions: Sequence[Prediction | None] | None,
        rng: random.Random,
    ) -> Pick:
        check_candidates(pods, predictions)
        options = self._options(request, pods, predictions)
        if not options:
            return self._chosen(composite_pick(pods, rng))
        best_tier = min(o.tier for o in options)
        feasible = [o for o in options if o.tier == best_tier]
        chosen, rule = self._choose(feasible, pods)
        if best_tier:
            rule += "_ttft_slo_missed" if best_tier == 2 else "_tpot_slo_missed"
        return self._chosen(Pick(chosen.pod, chosen.index, chosen.prediction, 1.0, rule))

    def _options(
        self,
        request: RequestInfo,
        pods: Sequence[PodState],
        predictions: Sequence[Prediction | None] | None,
    ) -> list[_Option]:
        if predictions is None:
            return []
        out = []
        for index, (pod, p) in enumerate(zip(pods, predictions, strict=True)):
            if p is None:
                continue
            if not self.learned(p.model_version, p.ttft_model_splits):
                out.append(_Option(index, pod, p, 0, float(pod.prefill_tokens_in_flight), False))
            else:
                out.append(_Option(index, pod, p, self._tier(request, pod, p), p.ttft_ms, True))
        return out

    def learned(self, version: str, splits: int | None = None) -> bool:
        """Whether answers of model `version` are a measurement of this pool (rule 7), its
        model of the target that ranks having `splits` split nodes (None: not known); it
        counts the trained versions seen, so ask it of each version as it answers."""
        if version in self.config.unlearned_versions or splits == 0:
            return False
        if len(self._versions) > self.config.warmup_models:
            return True  # warm-up is over: stop collecting (a version every retrain)
        self._versions.add(version)
        return len(self._versions) > self.config.warmup_models

    def _tier(self, request: RequestInfo, pod: PodState, p: Prediction) -> int:
        ttft_ok = request.ttft_slo_ms is None or p.ttft_ms <= request.ttft_slo_ms
        tpot_ok = (
            request.tpot_slo_ms is None
            or not request.streaming
            or pod.pod_type == "prefill"
            or p.tpot_ms <= buffered_tpot_slo(request, pod, self.config.slo_buffer_factor)
        )
        return (0 if tpot_ok else 1) if ttft_ok else 2

    def _choose(self, feasible: list[_Option], pods: Sequence[PodState]) -> tuple[_Option, str]:
        config = self.config
        fastest = min(feasible, key=self._speed)
        sticky = [o for o in feasible if o.pod.prefix_cache_score >= config.affinity_tau]
        if sticky:
            best_sticky = min(sticky, key=self._speed)
            saving = best_sticky.cost - fastest.cost
            if not best_sticky.learned or saving <= config.affinity_slack * best_sticky.cost:
                return best_sticky, "affinity"
            return fastest, "fastest"
        if any(pod.prefix_cache_score > 0 for pod in pods):
            return fastest, "fastest"
        limit = fastest.cost * (1 + config.near_best) + config.near_best_ms
        band = [o for o in feasible if o.cost <= limit]
        # Only pods of the fastest pod's class starve: a slower class is meant to get less.
        starved = [
            o
            for o in feasible
            if o.pod.pod_class == fastest.pod.pod_class and self._starved(o.pod.name, len(pods))
        ]
        chosen = min((*band, *starved), key=self._last)
        return chosen, "starved" if chosen not in band else "least_recent"

    def _speed(self, option: _Option) -> tuple[float, int]:
        return option.cost, self._last(option)

    def _last(self, option: _Option) -> int:
        return self._last_pick.get(option.pod.name, -1)

    def _starved(self, name: str, pods: int) -> bool:
        window = self.config.starve_after_picks_per_pod * pods
        return self._picks - self._last_pick.get(name, -1) > window

    def _chosen(self, chosen: Pick) -> Pick:
        self._picks += 1
        if chosen.pod is not None:
            self._last_pick[chosen.pod.name] = self._picks
        return chosen
