"""Picker steps 4 and 5 (docs/picker.md): the latency scorer, its composite
fallback when there are no predictions, and the weighted-random pick."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Literal

from latency_client._headroom import Candidate, Headroom
from latency_client._types import PodState

Strategy = Literal["least", "most"]
NO_SPREAD = 1e-9  # a dimension whose min-max range is below this does not differentiate

# The groups scored when no pod is positive and none is idle, in order of preference.
NEGATIVE_GROUPS: tuple[tuple[str, Callable[[Headroom], bool]], ...] = (
    ("tpot_negative", lambda h: h.tpot_ms < 0 <= h.ttft_ms),
    ("ttft_negative", lambda h: h.ttft_ms < 0 <= h.tpot_ms),
    ("both_negative", lambda h: h.ttft_ms < 0 and h.tpot_ms < 0),
)


def min_max(values: Sequence[float]) -> tuple[list[float], bool]:
    """Values scaled to 0..1 by min-max, and whether they had any spread (without spread
    every value is at the minimum: 0)."""
    low, high = min(values), max(values)
    if high - low <= NO_SPREAD:
        return [0.0] * len(values), False
    return [(v - low) / (high - low) for v in values], True


def dimension_weights(
    ttft_weight: float, tpot_weight: float, ttft_spread: bool, tpot_spread: bool
) -> tuple[float, float]:
    """A dimension without spread gives its weight to the other; neither: 0.5 each."""
    if ttft_spread and not tpot_spread:
        return 1.0, 0.0
    if tpot_spread and not ttft_spread:
        return 0.0, 1.0
    if not ttft_spread and not tpot_spread:
        return 0.5, 0.5
    total = ttft_weight + tpot_weight
    return ttft_weight / total, tpot_weight / total


def headroom_scores(
    headrooms: Sequence[Headroom],
    ttft_weight: float = 0.8,
    tpot_weight: float = 0.2,
    strategy: Strategy = "least",
) -> list[float]:
    """Scores in 0.01..1.01 from the absolute headrooms: "least" favours the smallest
    (best fit), "most" the largest."""
    n_ttft, ttft_spread = min_max([abs(h.ttft_ms) for h in headrooms])
    n_tpot, tpot_spread = min_max([abs(h.tpot_ms) for h in headrooms])
    w_ttft, w_tpot = dimension_weights(ttft_weight, tpot_weight, ttft_spread, tpot_spread)
    scores = []
    for a, b in zip(n_ttft, n_tpot, strict=True):
        combined = w_ttft * a + w_tpot * b
        weight = int(combined * 100) + 1 if strategy == "most" else int((1 - combined) * 100) + 1
        scores.append(weight / 100)
    return scores


def scored_group(
    candidates: Sequence[Candidate], strategy: Strategy
) -> tuple[list[tuple[int, Headroom]], str, Strategy]:
    """Which candidates get a latency score (index, headroom), the rule that chose them,
    and the strategy to score them with."""
    predicted = [(i, c.headroom) for i, c in enumerate(candidates) if c.headroom is not None]
    positive = [(i, h) for i, h in predicted if candidates[i].positive]
    if positive:
        return positive, "positive", strategy
    idle = [(i, h) for i, h in predicted if candidates[i].pod.running_requests == 0]
    if idle:
        return idle, "idle", "least"
    for rule, belongs in NEGATIVE_GROUPS:
        group = [(i, h) for i, h in predicted if belongs(h)]
        if group:
            return group, rule, "least"
    return predicted, "both_negative", "least"  # not reached: every pod is in one group


def composite_scores(pods: Sequence[PodState]) -> list[float]:
    """Without predictions: the mean of free KV cache, relative queue shortness
    (max_queue - queue) / max_queue (1 when no pod has a queue) and the prefix score."""
    max_queue = max(p.num_request_waiting for p in pods)
    return [
        (
            (1.0 - p.kv_cache_percentage)
            + ((max_queue - p.num_request_waiting) / max_queue if max_queue > 0 else 1.0)
            + p.prefix_cache_score
        )
        / 3.0
        for p in pods
    ]


def latency_scores(
    candidates: Sequence[Candidate],
    ttft_weight: float = 0.8,
    tpot_weight: float = 0.2,
    strategy: Strategy = "least",
) -> tuple[list[float], str]:
    """One score per candidate (0 for those not scored) and the rule that scored them."""
    if all(c.headroom is None for c in candidates):
        return composite_scores([c.pod for c in candidates]), "composite"
    group, rule, used = scored_group(candidates, strategy)
    scores = [0.0] * len(candidates)
    group_scores = headroom_scores([h for _, h in group], ttft_weight, tpot_weight, used)
    for (i, _), score in zip(group, group_scores, strict=True):
        scores[i] = score
    return scores, rule


def weighted_pick(scores: Sequence[float], rng: random.Random) -> int:
    """Index of the largest U ** (1 / score), U uniform: probability proportional to score
    (weighted reservoir sampling). Scores <= 0 never win; all <= 0: uniform."""
    best, best_key = -1, -1.0
    for i, score in enumerate(scores):
        if score > 0:
            key = rng.random() ** (1.0 / score)
            if key > best_key:
                best, best_key = i, key
    return best if best >= 0 else rng.randrange(len(scores))
