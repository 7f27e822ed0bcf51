"""llm-d's predicted-latency scheduling in Python, as pure functions
(docs/picker.md): the prefix-affinity filter, the SLO headroom tier filter and admission
here; producer rows and headroom in _headroom, the latency scorer (composite fallback
without predictions) and the weighted-random pick in _scoring. `pick` runs the whole
pipeline for one request.

Randomness comes only from the `random.Random` passed in, so a seeded one replays a pick.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from latency_client._headroom import Candidate, candidates
from latency_client._scoring import Strategy, latency_scores, weighted_pick
from latency_client._types import PodState, Prediction, RequestInfo


@dataclass(frozen=True)
class PickerConfig:
    """llm-d's defaults. `strict_affinity_tau` None runs one affinity filter only (the loose
    one), as llm-d's routing-only profile does."""

    strict_affinity_tau: float | None = 0.99
    loose_affinity_tau: float = 0.80
    affinity_exploration_probability: float = 0.0
    affinity_max_ttft_penalty_ms: float = 5000.0
    negative_tier_probability: float = 0.01
    ttft_weight: float = 0.8
    tpot_weight: float = 0.2
    strategy: Strategy = "least"
    slo_buffer_factor: float = 1.0
    admission_kv_threshold: float = 0.02


@dataclass(frozen=True, slots=True)
class Pick:
    """The chosen pod (None: shed by admission), its place in the pod list, the prediction
    the choice acted on (send it back as predicted_* in the training rows), its score and
    the scorer rule that applied: positive, idle, tpot_negative, ttft_negative,
    both_negative, composite, or shed."""

    pod: PodState | None
    index: int
    prediction: Prediction | None
    score: float
    rule: str


def affinity_filter(
    cands: Sequence[Candidate],
    tau: float,
    rng: random.Random,
    exploration_probability: float = 0.0,
    max_ttft_penalty_ms: float = 5000.0,
) -> list[Candidate]:
    """Keep only the sticky pods (prefix score >= tau), unless: an exploration draw says
    keep all, there is no sticky pod, or the best sticky pod's predicted TTFT exceeds the
    best other pod's by more than `max_ttft_penalty_ms`."""
    if exploration_probability > 0 and rng.random() < exploration_probability:
        return list(cands)
    sticky = [c for c in cands if c.pod.prefix_cache_score >= tau]
    if not sticky:
        return list(cands)
    best_sticky = _best_ttft(sticky)
    best_other = _best_ttft([c for c in cands if c.pod.prefix_cache_score < tau])
    if (
        best_sticky is not None
        and best_other is not None
        and best_sticky - best_other > max_ttft_penalty_ms
    ):
        return list(cands)
    return sticky


def _best_ttft(cands: Sequence[Candidate]) -> float | None:
    predicted = [c.prediction.ttft_ms for c in cands if c.prediction is not None]
    return min(predicted) if predicted else None


def tier_filter(
    cands: Sequence[Candidate], rng: random.Random, negative_probability: float = 0.01
) -> list[Candidate]:
    """Positive pods (both headrooms >= 0) or, with `negative_probability`, the negative
    ones (pods without a prediction among them); both only matter when both exist."""
    positive: list[Candidate] = []
    negative: list[Candidate] = []
    for c in cands:
        (positive if c.positive else negative).append(c)
    if positive and negative:
        return negative if rng.random() < negative_probability else positive
    return list(cands)


def admit(request: RequestInfo, cands: Sequence[Candidate], kv_threshold: float = 0.02) -> bool:
    """Sheddable requests (negative priority, with an SLO header) are rejected when no pod
    is predicted to meet the SLO, none has zero running requests and none is below
    `kv_threshold` KV-cache usage; everything else is admitted."""
    if request.priority >= 0 or not request.has_slo:
        return True
    return any(
        c.positive or c.pod.running_requests == 0 or c.pod.kv_cache_percentage < kv_threshold
        for c in cands
    )


def pick(
    request: RequestInfo,
    pods: Sequence[PodState],
    predictions: Sequence[Prediction | None] | None,
    rng: random.Random,
    config: PickerConfig | None = None,
    *,
    admission: bool = True,
) -> Pick:
    """The whole pipeline: admission, strict affinity, tier, loose affinity, scorer, pick.
    `predictions` as for `candidates` (None when the predictor is unavailable)."""
    if not pods:
        raise ValueError("no candidate pods")
    config = config or PickerConfig()
    cands = candidates(request, pods, predictions, config.slo_buffer_factor)
    if admission and not admit(request, cands, config.admission_kv_threshold):
        return Pick(None, -1, None, 0.0, "shed")
    kept = list(cands)
    if config.strict_affinity_tau is not None:
        kept = affinity_filter(
            kept,
            config.strict_affinity_tau,
            rng,
            config.affinity_exploration_probability,
            config.affinity_max_ttft_penalty_ms,
        )
    kept = tier_filter(kept, rng, config.negative_tier_probability)
    kept = affinity_filter(
        kept,
        config.loose_affinity_tau,
        rng,
        config.affinity_exploration_probability,
        config.affinity_max_ttft_penalty_ms,
    )
    scores, rule = latency_scores(kept, config.ttft_weight, config.tpot_weight, config.strategy)
    chosen = weighted_pick(scores, rng)
    winner = kept[chosen]
    return Pick(winner.pod, winner.pod_index, winner.prediction, scores[chosen], rule)
