"""llm-d's picker (`pick` and its steps) against hand-worked cases for every rule of
docs/picker.md. Expected numbers are worked out in the comments, not computed by
the functions under test."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from latency_client import (
    PickerConfig,
    PodState,
    Prediction,
    RequestInfo,
    pick,
    prediction_row,
)
from latency_client._headroom import Candidate, Headroom, buffered_tpot_slo, candidates, headroom
from latency_client._picker import admit, affinity_filter, tier_filter
from latency_client._scoring import composite_scores, headroom_scores, latency_scores, weighted_pick

SLO = RequestInfo(input_token_length=100, ttft_slo_ms=1000.0, tpot_slo_ms=50.0)


class ScriptedRandom(random.Random):
    """random() answers the given values in order; one draw too many is an IndexError, so a
    test also proves how many draws a rule makes."""

    def __init__(self, values: list[float]) -> None:
        super().__init__(0)
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def pod(name: str, **fields: object) -> PodState:
    return PodState(name, **{"running_requests": 1, **fields})  # type: ignore[arg-type]


def p(ttft: float, tpot: float) -> Prediction:
    return Prediction(ttft, tpot, "v1")


def names(cands: list[Candidate]) -> list[str]:
    return [c.pod.name for c in cands]


# 1. Producer and headroom -------------------------------------------------------------


def test_prediction_row_uses_the_pickers_counts_and_the_epps_constants() -> None:
    row = prediction_row(
        RequestInfo(input_token_length=700, encoder_input_size=3),
        PodState(
            "a",
            kv_cache_percentage=0.4,
            num_request_waiting=2,
            running_requests=5,
            prefill_tokens_in_flight=900,
            prefix_cache_score=0.25,
            pod_type="decode",
            encoder_matched_size=1,
        ),
    )
    assert row == {
        "kv_cache_percentage": 0.4,
        "input_token_length": 700,
        "num_request_waiting": 2,
        "num_request_running": 5,
        "num_tokens_generated": 1,
        "prefix_cache_score": 0.25,
        "pod_type": "decode",
        "prefill_tokens_in_flight": 900,
        "decode_tokens_in_flight": 0,
        "encoder_matched_size": 1,
        "encoder_input_size": 3,
    }


def test_headroom_is_slo_minus_prediction() -> None:
    # 1000 - 400 = 600; 50 - 20 = 30
    assert headroom(SLO, pod("a"), p(400, 20)) == Headroom(600.0, 30.0)


def test_an_absent_slo_counts_as_zero() -> None:
    # 0 - 400 = -400; 0 - 20 = -20
    assert headroom(RequestInfo(100), pod("a"), p(400, 20)) == Headroom(-400.0, -20.0)


def test_buffered_tpot_slo_is_lowered_by_the_tightest_running_slo() -> None:
    busy = pod("a", running_tpot_slos_ms=(80.0, 30.0, 0.0))  # 0 = a request without SLO
    assert buffered_tpot_slo(SLO, busy, 1.0) == 30.0  # min(50 * 1, 30 * 1)
    assert buffered_tpot_slo(SLO, busy, 1.2) == pytest.approx(36.0)  # min(60, 36)
    assert buffered_tpot_slo(SLO, pod("b", running_tpot_slos_ms=(80.0,)), 1.0) == 50.0
    assert headroom(SLO, busy, p(400, 20)).tpot_ms == 10.0  # 30 - 20
    assert headroom(SLO, busy, p(400, 20), buffer_factor=1.2).tpot_ms == pytest.approx(16.0)


def test_tpot_does_not_apply_to_prefill_pods_or_non_streaming_requests() -> None:
    # TPOT 100 would miss the 50 ms SLO by 50, but it does not count: headroom 0, met.
    prefill = headroom(SLO, pod("a", pod_type="prefill"), p(400, 100))
    batch = headroom(RequestInfo(100, 1000.0, 50.0, streaming=False), pod("b"), p(400, 100))
    assert prefill == batch == Headroom(600.0, 0.0)
    assert prefill.positive


@pytest.mark.parametrize(
    "request_info",
    [SLO, RequestInfo(100), RequestInfo(100, 1000.0, 50.0, streaming=False)],
    ids=["slo", "no-slo", "not-streaming"],
)
@pytest.mark.parametrize("buffer_factor", [1.0, 1.2])
def test_candidates_carry_each_pods_headroom(
    request_info: RequestInfo, buffer_factor: float
) -> None:
    # candidates() computes headrooms inline for speed: it must agree with headroom() on
    # every branch (prefill pod, tighter running SLOs, missing prediction, sign of each).
    pods = [
        pod("a"),
        pod("b", pod_type="prefill"),
        pod("c", running_tpot_slos_ms=(30.0, 0.0)),
        pod("d", running_tpot_slos_ms=(80.0,)),
        pod("e"),
        pod("f"),
    ]
    predictions = [p(400, 20), p(400, 100), p(1200, 20), p(900, 45), None, p(1000, 50)]
    cands = candidates(request_info, pods, predictions, buffer_factor)
    assert [c.pod_index for c in cands] == list(range(len(pods)))
    for c, one_pod, prediction in zip(cands, pods, predictions, strict=True):
        assert c.pod is one_pod and c.prediction == prediction
        if prediction is None:
            assert c.headroom is None and not c.positive
            continue
        expected = headroom(request_info, one_pod, prediction, buffer_factor)
        assert c.headroom == pytest.approx(expected)
        assert c.positive == expected.positive
    signs = {c.positive for c in cands[:4]}
    assert signs == ({True, False} if request_info.has_slo else {False})  # both branches met


# 2. Prefix-affinity filter ------------------------------------------------------------

STICKY_PODS = [
    pod("a", prefix_cache_score=1.0),
    pod("b", prefix_cache_score=0.5),
    pod("c", prefix_cache_score=0.995),
]


def affinity(
    ttfts: list[float],
    tau: float = 0.99,
    rng: random.Random | None = None,
    exploration: float = 0.0,
) -> list[str]:
    cands = candidates(SLO, STICKY_PODS, [p(t, 10) for t in ttfts])
    return names(affinity_filter(cands, tau, rng or ScriptedRandom([]), exploration))


def test_affinity_keeps_only_sticky_pods() -> None:
    # sticky a (1.0) and c (0.995); best sticky 3000, best other 100: 2900 <= 5000 ms
    assert affinity([3000, 100, 6000]) == ["a", "c"]


def test_affinity_is_dropped_past_a_5000_ms_ttft_penalty() -> None:
    # best sticky min(5101, 6000) = 5101; best other 100; 5001 > 5000: keep all
    assert affinity([5101, 100, 6000]) == ["a", "b", "c"]
    # exactly 5000 is not more than 5000: sticky only
    assert affinity([5100, 100, 6000]) == ["a", "c"]


def test_affinity_without_sticky_pods_keeps_all_and_loose_tau_is_wider() -> None:
    assert affinity([100, 100, 100], tau=1.01) == ["a", "b", "c"]
    # tau 0.80: b (0.5) is still out
    assert affinity([100, 100, 100], tau=0.80) == ["a", "c"]
    assert affinity([100, 100, 100], tau=0.40) == ["a", "b", "c"]  # everyone sticky


def test_affinity_exploration_keeps_all_when_the_draw_is_below_the_probability() -> None:
    assert affinity([3000, 100, 6000], rng=ScriptedRandom([0.05]), exploration=0.1) == [
        "a",
        "b",
        "c",
    ]
    assert affinity([3000, 100, 6000], rng=ScriptedRandom([0.5]), exploration=0.1) == ["a", "c"]


def test_affinity_without_predictions_keeps_sticky_pods() -> None:
    cands = candidates(SLO, STICKY_PODS, None)
    assert names(affinity_filter(cands, 0.99, ScriptedRandom([]))) == ["a", "c"]


# 3. SLO headroom tier filter ------------------------------------------------------------

TIER_PODS = [pod("pos"), pod("neg"), pod("unknown")]
TIER_PREDICTIONS = [p(400, 20), p(1400, 20), None]  # neg: 1000 - 1400 < 0; unknown: none


def tiers(rng: random.Random) -> list[str]:
    return names(tier_filter(candidates(SLO, TIER_PODS, TIER_PREDICTIONS), rng, 0.01))


def test_tier_filter_keeps_the_positive_tier_unless_the_draw_is_below_0_01() -> None:
    assert tiers(ScriptedRandom([0.5])) == ["pos"]
    assert tiers(ScriptedRandom([0.0099])) == ["neg", "unknown"]  # no prediction = negative
    assert tiers(ScriptedRandom([0.01])) == ["pos"]  # 0.01 < 0.01 is false


def test_tier_filter_with_one_tier_keeps_it_without_a_draw() -> None:
    cands = candidates(SLO, TIER_PODS[1:], TIER_PREDICTIONS[1:])
    assert names(tier_filter(cands, ScriptedRandom([]), 0.01)) == ["neg", "unknown"]


def test_tier_exploration_rate_is_one_percent_with_a_seeded_rng() -> None:
    cands = candidates(SLO, TIER_PODS, TIER_PREDICTIONS)
    rng = random.Random(7)
    draws = 100_000
    negative = sum(tier_filter(cands, rng, 0.01)[0].pod.name == "neg" for _ in range(draws))
    # binomial: mean 1000, sd sqrt(100000 * 0.01 * 0.99) = 31.5; 5 sd = 157
    assert 843 <= negative <= 1157


# 4. Latency scorer ---------------------------------------------------------------------
# Three positive pods; abs headrooms TTFT 100, 200, 420 (range 320) and TPOT 10, 19, 26
# (range 16) normalise to TTFT 0, 100/320 = 0.3125, 1 and TPOT 0, 9/16 = 0.5625, 1.
# combined = 0.8 n_ttft + 0.2 n_tpot: a 0; b 0.25 + 0.1125 = 0.3625; c 0.8 + 0.2 = 1.
# least: int((1 - c) * 100) + 1 -> a 101, b int(63.75) + 1 = 64, c 1 -> 1.01, 0.64, 0.01
# most:  int(c * 100) + 1       -> a 1,   b int(36.25) + 1 = 37, c 101 -> 0.01, 0.37, 1.01
SPREAD = [Headroom(100, 10), Headroom(200, 19), Headroom(420, 26)]


def test_least_prefers_the_tightest_fit_and_most_the_largest_headroom() -> None:
    assert headroom_scores(SPREAD, strategy="least") == [1.01, 0.64, 0.01]
    assert headroom_scores(SPREAD, strategy="most") == [0.01, 0.37, 1.01]


def test_a_dimension_without_spread_gives_its_weight_to_the_other() -> None:
    # TPOT all 0 (non-streaming): weights 1 / 0; TTFT n 0, 0.3125, 1
    # least: 101, int(68.75) + 1 = 69, 1
    no_tpot = [Headroom(h.ttft_ms, 0.0) for h in SPREAD]
    assert headroom_scores(no_tpot) == [1.01, 0.69, 0.01]
    # TTFT all 300: weights 0 / 1; TPOT n 0, 0.5625, 1 -> 101, int(43.75) + 1 = 44, 1
    no_ttft = [Headroom(300.0, h.tpot_ms) for h in SPREAD]
    assert headroom_scores(no_ttft) == [1.01, 0.44, 0.01]
    # neither has spread: 0.5 each, every n 0 -> least 101, most 1 for every pod
    same = [Headroom(300.0, 5.0)] * 3
    assert headroom_scores(same) == [1.01, 1.01, 1.01]
    assert headroom_scores(same, strategy="most") == [0.01, 0.01, 0.01]


def test_tied_pods_get_the_same_score() -> None:
    # a and b identical: both at the minimum (n 0, 0) -> 1.01; c at the maximum -> 0.01
    tied = [Headroom(100, 10), Headroom(100, 10), Headroom(420, 26)]
    assert headroom_scores(tied) == [1.01, 1.01, 0.01]


def scores_of(
    preds: list[Prediction], pods: list[PodState] | None = None, request: RequestInfo = SLO
) -> tuple[list[float], str]:
    pods = pods or [pod(name) for name in "xyz"[: len(preds)]]
    return latency_scores(candidates(request, pods, preds))


def test_only_positive_pods_are_scored_when_there_is_one() -> None:
    # x: 1000-400, 50-20 positive; y: TTFT 1000-1400 < 0; z: positive, same as x
    assert scores_of([p(400, 20), p(1400, 20), p(400, 20)]) == ([1.01, 0.0, 1.01], "positive")


def test_without_slo_every_pod_is_negative_and_the_fastest_wins() -> None:
    # headrooms -100/-10, -200/-19, -420/-26: abs values as SPREAD -> least 1.01, 0.64, 0.01
    preds = [p(100, 10), p(200, 19), p(420, 26)]
    assert scores_of(preds, request=RequestInfo(100)) == ([1.01, 0.64, 0.01], "both_negative")


def test_idle_pods_are_preferred_when_no_pod_is_positive() -> None:
    # i1 (-100, -2) and i2 (-300, -9) idle; b busy and best, but not scored.
    # idle: TTFT n 0, 1; TPOT n 0, 1 -> 1.01, 0.01
    pods = [pod("i1", running_requests=0), pod("i2", running_requests=0), pod("b")]
    slo = RequestInfo(100, ttft_slo_ms=0.0, tpot_slo_ms=0.0)
    assert scores_of([p(100, 2), p(300, 9), p(10, 1)], pods, slo) == ([1.01, 0.01, 0.0], "idle")


def test_negative_groups_in_order_tpot_only_then_ttft_only_then_both() -> None:
    # x: TTFT +100, TPOT 50-55 = -5 (TPOT only); y: TTFT -200 (TTFT only); z: both negative
    preds = [p(900, 55), p(1200, 47), p(1050, 51)]
    assert scores_of(preds) == ([1.01, 0.0, 0.0], "tpot_negative")  # alone: no spread
    assert scores_of(preds[1:]) == ([1.01, 0.0], "ttft_negative")
    # both negative only: headrooms -100/-11, -230/-2, -420/-18
    # TTFT n 0, 130/320 = 0.40625, 1; TPOT (min 2, range 16) n 9/16 = 0.5625, 0, 1
    # combined 0.1125, 0.325, 1 -> int(88.75)+1 = 89, int(67.5)+1 = 68, 1
    both = [p(1100, 61), p(1230, 52), p(1420, 68)]
    assert scores_of(both) == ([0.89, 0.68, 0.01], "both_negative")


def test_composite_score_without_predictions() -> None:
    pods = [
        pod("p1", kv_cache_percentage=0.2, num_request_waiting=0, prefix_cache_score=0.5),
        pod("p2", kv_cache_percentage=0.6, num_request_waiting=4),
        pod("p3", kv_cache_percentage=0.5, num_request_waiting=2, prefix_cache_score=1.0),
    ]
    # max queue 4: p1 (0.8 + 4/4 + 0.5) / 3 = 2.3 / 3; p2 (0.4 + 0 + 0) / 3;
    # p3 (0.5 + 2/4 + 1.0) / 3 = 2 / 3
    assert composite_scores(pods) == pytest.approx([2.3 / 3, 0.4 / 3, 2 / 3])
    assert scores_of([None, None, None], pods)[1] == "composite"  # type: ignore[list-item]
    # no queue anywhere: relative shortness counts 1 for every pod
    idle = [pod("q", kv_cache_percentage=0.25), pod("r", kv_cache_percentage=1.0)]
    assert composite_scores(idle) == pytest.approx([(0.75 + 1) / 3, (0 + 1) / 3])


# 5. Weighted-random pick -----------------------------------------------------------------


def test_weighted_pick_takes_the_largest_u_to_the_power_one_over_score() -> None:
    # keys: 0.25 ** (1/0.5) = 0.0625 vs 0.81 ** 1 = 0.81 -> index 1
    assert weighted_pick([0.5, 1.0], ScriptedRandom([0.25, 0.81])) == 1
    # 0.9 ** 2 = 0.81 vs 0.5 -> index 0
    assert weighted_pick([0.5, 1.0], ScriptedRandom([0.9, 0.5])) == 0
    # a zero score draws nothing and never wins
    assert weighted_pick([0.0, 0.3, 0.0], ScriptedRandom([0.01])) == 1


def test_weighted_pick_probabilities_are_proportional_to_scores() -> None:
    rng = random.Random(11)
    wins = Counter(weighted_pick([0.75, 0.25], rng) for _ in range(20_000))
    # P(first) = 0.75 / (0.75 + 0.25); sd sqrt(20000 * 0.75 * 0.25) = 61; 5 sd = 306
    assert 15_000 - 306 <= wins[0] <= 15_000 + 306


def test_all_scores_zero_pick_uniformly() -> None:
    rng = random.Random(5)
    wins = Counter(weighted_pick([0.0, 0.0, 0.0], rng) for _ in range(30_000))
    # 10,000 each; sd sqrt(30000 * 1/3 * 2/3) = 82; 5 sd = 408
    assert all(10_000 - 408 <= wins[i] <= 10_000 + 408 for i in range(3))


# 6. Admission ----------------------------------------------------------------------------

SHEDDABLE = RequestInfo(100, ttft_slo_ms=100.0, tpot_slo_ms=50.0, priority=-1)
LATE = [p(500, 5), p(600, 5)]  # TTFT 100 - 500 < 0 everywhere


def admitted(pods: list[PodState], request: RequestInfo = SHEDDABLE) -> bool:
    return admit(request, candidates(request, pods, LATE))


def test_admission_rejects_only_when_nothing_could_serve_the_request() -> None:
    busy = [pod("a", kv_cache_percentage=0.5), pod("b", kv_cache_percentage=0.02)]
    assert not admitted(busy)  # 0.02 is not below 2 %
    assert admitted([busy[0], pod("b", kv_cache_percentage=0.019)])
    assert admitted([busy[0], pod("b", kv_cache_percentage=0.5, running_requests=0)])
    assert admit(SHEDDABLE, candidates(SHEDDABLE, busy, [p(50, 5), p(600, 5)]))  # a meets it


def test_a_streaming_request_with_only_a_ttft_slo_meets_it_nowhere() -> None:
    # The absent TPOT SLO counts as 0: TPOT headroom 0 - 5 = -5 on a pod whose TTFT
    # (100 - 50 = +50) fits, so no pod is positive and a sheddable request is shed.
    only_ttft = RequestInfo(100, ttft_slo_ms=100.0, priority=-1)
    busy = [pod("a", kv_cache_percentage=0.5)]
    assert headroom(only_ttft, busy[0], p(50, 5)) == Headroom(50.0, -5.0)
    assert not admit(only_ttft, candidates(only_ttft, busy, [p(50, 5)]))


def test_admission_applies_only_to_sheddable_requests_with_an_slo() -> None:
    busy = [pod("a", kv_cache_percentage=0.5), pod("b", kv_cache_percentage=0.5)]
    assert admitted(busy, RequestInfo(100, ttft_slo_ms=100.0, priority=0))
    assert admitted(busy, RequestInfo(100, priority=-1))  # no SLO header
    shed = pick(SHEDDABLE, busy, LATE, random.Random(1))
    assert shed.pod is None and shed.rule == "shed"
    assert pick(SHEDDABLE, busy, LATE, random.Random(1), admission=False).pod is not None


# The whole pipeline ----------------------------------------------------------------------


def test_pick_keeps_a_sticky_pod_that_meets_the_slo() -> None:
    pods = [pod("sticky", prefix_cache_score=1.0), pod("other")]
    # strict affinity keeps sticky (900 - 100 = 800 <= 5000); one pod left: score 1.01
    chosen = pick(SLO, pods, [p(900, 20), p(100, 20)], ScriptedRandom([0.3]))
    assert (chosen.pod, chosen.index, chosen.rule, chosen.score) == (pods[0], 0, "positive", 1.01)
    assert chosen.prediction == p(900, 20)


def test_pick_leaves_a_sticky_pod_too_slow_by_more_than_5000_ms() -> None:
    pods = [pod("sticky", prefix_cache_score=1.0), pod("other")]
    # 6000 - 900 = 5100 > 5000: all kept; sticky is negative (1000 - 6000), other positive;
    # tier draw 0.5 >= 0.01 keeps positive; loose affinity: no sticky left; pick draws once
    chosen = pick(SLO, pods, [p(6000, 20), p(900, 20)], ScriptedRandom([0.5, 0.3]))
    assert (chosen.index, chosen.rule) == (1, "positive")


def test_pick_without_predictions_uses_the_composite_score() -> None:
    pods = [
        pod("full", kv_cache_percentage=1.0, num_request_waiting=5),
        pod("free", kv_cache_percentage=0.0),
    ]
    # full: (0 + 0 + 0) / 3 = 0 never wins; free: (1 + 1 + 0) / 3
    chosen = pick(SLO, pods, None, ScriptedRandom([0.5]))
    assert (chosen.index, chosen.rule, chosen.prediction) == (1, "composite", None)
    assert chosen.score == pytest.approx(2 / 3)


def test_pick_replays_with_the_same_seed() -> None:
    rng_pods = random.Random(3)
    pods = [pod(f"p{i}", kv_cache_percentage=rng_pods.random()) for i in range(50)]
    preds = [p(rng_pods.uniform(100, 900), rng_pods.uniform(5, 40)) for _ in pods]
    first = [pick(SLO, pods, preds, random.Random(s)).index for s in range(20)]
    assert first == [pick(SLO, pods, preds, random.Random(s)).index for s in range(20)]
    assert len(set(first)) > 1  # weighted random, not argmax


def test_config_changes_strategy() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    preds = [p(900, 40), p(800, 31), p(580, 24)]  # headrooms = SPREAD
    most = PickerConfig(strategy="most")
    scores = latency_scores(candidates(SLO, pods, preds), strategy=most.strategy)
    assert scores == ([0.01, 0.37, 1.01], "positive")
