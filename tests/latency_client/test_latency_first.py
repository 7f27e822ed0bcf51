"""LatencyFirstPicker against hand-worked cases, one per rule of its docstring.
Expected pods are worked out in the comments, not computed by the code under test."""

from __future__ import annotations

import random

import pytest

from latency_client import (
    LatencyFirstConfig,
    LatencyFirstPicker,
    PodState,
    Prediction,
    RequestInfo,
)

SLO = RequestInfo(input_token_length=100, ttft_slo_ms=500.0, tpot_slo_ms=50.0)
NO_SLO = RequestInfo(input_token_length=100)
RNG = random.Random(0)


def learned() -> LatencyFirstPicker:
    """A picker that trusts every trained version at once (no warm-up model)."""
    return LatencyFirstPicker(LatencyFirstConfig(warmup_models=0))


def pod(name: str, prefix: float = 0.0, **fields: object) -> PodState:
    return PodState(name, prefix_cache_score=prefix, **fields)  # type: ignore[arg-type]


def p(ttft: float, tpot: float = 20.0) -> Prediction:
    return Prediction(ttft, tpot, "v1")


def test_fastest_pod_among_those_meeting_both_slos() -> None:
    # a: fastest but TPOT 60 > 50; b: 300 ms meets both; c: 200 ms meets both -> c
    pods = [pod("a", 0.1), pod("b", 0.1), pod("c", 0.1)]
    chosen = learned().pick(SLO, pods, [p(100, 60), p(300), p(200)], RNG)
    assert (chosen.index, chosen.rule) == (2, "fastest")
    assert chosen.prediction == p(200)


def test_no_pod_meets_both_then_ttft_only_then_fastest_of_all() -> None:
    pods = [pod("a", 0.1), pod("b", 0.1), pod("c", 0.1)]
    # nobody meets TPOT (90 > 50); b and c meet TTFT (450, 400 <= 500), a does not (600)
    # -> the faster of b and c: c
    got = learned().pick(SLO, pods, [p(600, 90), p(450, 90), p(400, 90)], RNG)
    assert (got.index, got.rule) == (2, "fastest_tpot_slo_missed")
    # nobody meets the TTFT SLO -> fastest overall, b
    got = learned().pick(SLO, pods, [p(900, 90), p(600, 90), p(700, 90)], RNG)
    assert (got.index, got.rule) == (1, "fastest_ttft_slo_missed")


def test_meeting_only_the_tpot_slo_earns_no_preference() -> None:
    # nobody meets TTFT; a meets TPOT (20 <= 50) but waits 3 s; b misses TPOT at 600 ms -> b
    pods = [pod("a", 0.1), pod("b", 0.1)]
    got = learned().pick(SLO, pods, [p(3000, 20), p(600, 90)], RNG)
    assert (got.index, got.rule) == (1, "fastest_ttft_slo_missed")


def test_an_absent_slo_counts_as_met() -> None:
    # llm-d's headroom would be negative for every pod here (absent = 0 ms); ours: fastest
    pods = [pod("a", 0.1), pod("b", 0.1)]
    got = learned().pick(NO_SLO, pods, [p(300, 40), p(250, 45)], RNG)
    assert (got.index, got.rule) == (1, "fastest")


def test_tpot_budget_is_lowered_by_the_tightest_running_slo() -> None:
    # b is faster, but a request with a 30 ms TPOT SLO runs there: 40 > 30 -> a
    pods = [pod("a", 0.1), pod("b", 0.1, running_tpot_slos_ms=(30.0,))]
    got = learned().pick(SLO, pods, [p(300, 40), p(200, 40)], RNG)
    assert got.index == 0


def test_prefix_group_stays_on_its_pod_within_the_slack() -> None:
    # a holds the prefix (0.9 >= 0.8) at 300 ms; b cold at 250 ms: saving 50 <= 0.5 x 300
    pods = [pod("a", 0.9), pod("b", 0.0)]
    got = learned().pick(SLO, pods, [p(300), p(250)], RNG)
    assert (got.index, got.rule) == (0, "affinity")
    # b at 140 ms: saving 160 > 150 -> the group splits to b
    got = learned().pick(SLO, pods, [p(300), p(140)], RNG)
    assert (got.index, got.rule) == (1, "fastest")


def test_the_cold_start_prior_never_splits_a_group() -> None:
    # as above, b predicted 140 vs 300 ms would split the group, but by the prior: a stays
    pods = [pod("a", 0.9), pod("b", 0.0)]
    prior = [Prediction(300, 20, "cold-start-prior"), Prediction(140, 20, "cold-start-prior")]
    got = learned().pick(SLO, pods, prior, RNG)
    assert (got.index, got.rule) == (0, "affinity")


def test_warm_up_ranks_by_prompt_tokens_in_flight_and_ignores_the_priors_slo_verdict() -> None:
    # the prior predicts 900 ms everywhere (> the 500 ms SLO): not a verdict on this pool.
    # tokens in flight 3000 / 500 / 520: band = 500 x 1.1 + 5 = 555 -> b and c, in turn
    prior = [Prediction(900, 20, "cold-start-prior")] * 3
    counts = (3000, 500, 520)
    pods = [pod(name, prefill_tokens_in_flight=n) for name, n in zip("abc", counts, strict=True)]
    picker = learned()
    got = [picker.pick(SLO, pods, prior, RNG) for _ in range(4)]
    assert [g.index for g in got] == [1, 2, 1, 2]
    assert {g.rule for g in got} == {"least_recent"}  # no "_no_slo_met": all feasible
    # once a learned model answers, its TTFT decides again: a (fastest) wins
    trained = [Prediction(100, 20, "v7"), Prediction(400, 20, "v7"), Prediction(400, 20, "v7")]
    assert picker.pick(SLO, pods, trained, RNG).index == 0


def test_warmup_models_counts_trained_versions_as_warm_up() -> None:
    # warmup_models = 1: v1 ranks like the prior (tokens in flight: b), v2 by TTFT (a)
    pods = [pod("a", prefill_tokens_in_flight=3000), pod("b", prefill_tokens_in_flight=10)]
    picker = LatencyFirstPicker(LatencyFirstConfig(warmup_models=1))
    first = [Prediction(100, 20, "v1"), Prediction(400, 20, "v1")]
    second = [Prediction(100, 20, "v2"), Prediction(400, 20, "v2")]
    assert picker.pick(SLO, pods, first, RNG).index == 1
    assert picker.pick(SLO, pods, second, RNG).index == 0
    assert picker.pick(SLO, pods, first, RNG).index == 0  # v1 seen again: no longer warm-up


def test_a_model_without_splits_is_warm_up_and_is_not_counted() -> None:
    # Versions whose TTFT model is a constant (the trainer's running p90s: 0 splits) rank
    # like the prior, by tokens in flight (b), however many answered; the first version
    # with trees ranks by TTFT (a); with warmup_models = 1 the second one does.
    pods = [pod("a", prefill_tokens_in_flight=3000), pod("b", prefill_tokens_in_flight=10)]

    def answers(version: str, splits: int | None) -> list[Prediction]:
        return [Prediction(100, 20, version, splits, 7), Prediction(400, 20, version, splits, 7)]

    picker = LatencyFirstPicker()
    for version in ("v1", "v2", "v3"):
        assert picker.pick(SLO, pods, answers(version, 0), RNG).index == 1
    assert picker.pick(SLO, pods, answers("v4", 31), RNG).index == 0
    assert picker.pick(SLO, pods, answers("v5", 0), RNG).index == 1  # a constant again
    counting = LatencyFirstPicker(LatencyFirstConfig(warmup_models=1))
    assert counting.pick(SLO, pods, answers("v1", 0), RNG).index == 1
    assert counting.pick(SLO, pods, answers("v2", 31), RNG).index == 1
    assert counting.pick(SLO, pods, answers("v3", 40), RNG).index == 0
    # a server that does not count splits (llm-d's): its first trained version ranks
    assert LatencyFirstPicker().pick(SLO, pods, answers("v1", None), RNG).index == 0


def test_affinity_only_among_pods_meeting_the_slo() -> None:
    # a holds the prefix but is predicted to miss the 500 ms SLO; b meets it -> b
    pods = [pod("a", 0.95), pod("b", 0.0)]
    got = learned().pick(SLO, pods, [p(600), p(450)], RNG)
    assert (got.index, got.rule) == (1, "fastest")


def test_partial_hit_somewhere_goes_to_the_fastest() -> None:
    # best prefix score 0.5 < tau: no stickiness, and not a cache-less request -> fastest
    config = LatencyFirstConfig(warmup_models=0, near_best=0.5, near_best_ms=100.0)
    pods = [pod("a", 0.5), pod("b", 0.0)]
    picker = LatencyFirstPicker(config)
    assert picker.pick(SLO, pods, [p(200), p(210)], RNG).index == 0
    assert picker.pick(SLO, pods, [p(200), p(210)], RNG).index == 0  # no rotation


def test_cacheless_requests_rotate_over_the_near_best_band() -> None:
    # band = 100 x 1.1 + 5 = 115 ms: a, b, c are in it, d (200) is not -> a, b, c in turn
    config = LatencyFirstConfig(
        warmup_models=0, near_best=0.1, near_best_ms=5.0, starve_after_picks_per_pod=99
    )
    picker = LatencyFirstPicker(config)
    pods = [pod(name) for name in "abcd"]
    preds = [p(100), p(110), p(114), p(200)]
    picked = [picker.pick(SLO, pods, preds, RNG).index for _ in range(6)]
    assert picked == [0, 1, 2, 0, 1, 2]


def test_a_starved_pod_gets_a_cacheless_request_once_per_window() -> None:
    # d is predicted slow (no cache, never picked); window = 1 x 4 pods = 4 picks
    config = LatencyFirstConfig(
        warmup_models=0, near_best=0.0, near_best_ms=0.0, starve_after_picks_per_pod=1
    )
    picker = LatencyFirstPicker(config)
    pods = [pod(name) for name in "abcd"]
    preds = [p(100), p(100), p(100), p(300)]
    rules = [picker.pick(SLO, pods, preds, RNG) for _ in range(12)]
    to_d = [i for i, got in enumerate(rules) if got.index == 3]
    assert [rules[i].rule for i in to_d] == ["starved"] * len(to_d)
    # picks 0-3 go to a, b, c, a; at pick 4 more than 4 picks have passed without d; then
    # b, c, a, b, c (the least recent first) and d again at pick 10
    assert to_d == [4, 10]
    # a starved pod must still meet the SLO to be explored
    preds[3] = p(900)
    picker = LatencyFirstPicker(config)
    assert all(picker.pick(SLO, pods, preds, RNG).index != 3 for _ in range(20))


def test_only_pods_of_the_fastest_pods_class_starve() -> None:
    # a, b (b200) 100 ms; c (b200) and d (h200) 300 ms, within the SLO, outside the band;
    # window = 1 x 4 pods = 4 picks. Picks 0-3: a, b, a, b; at pick 4 both c and d have
    # gone more than 4 picks without one, but only c is of the fastest's class: c; then
    # a, b, a, b, a and c again at pick 10. d, of a slower class, never (without classes
    # it would have followed c at pick 5).
    config = LatencyFirstConfig(
        warmup_models=0, near_best=0.0, near_best_ms=0.0, starve_after_picks_per_pod=1
    )
    picker = LatencyFirstPicker(config)
    pods = [pod(name, pod_class="b200") for name in "abc"] + [pod("d", pod_class="h200")]
    preds = [p(100), p(100), p(300), p(300)]
    picks = [picker.pick(SLO, pods, preds, RNG) for _ in range(12)]
    slow = [(i, got.index, got.rule) for i, got in enumerate(picks) if got.index >= 2]
    assert slow == [(4, 2, "starved"), (10, 2, "starved")]


def test_a_pod_of_a_slower_class_still_gets_its_turn_in_the_band() -> None:
    # band = 100 x 1.1 + 5 = 115 ms: a (b200) and c (h200, 108 ms) take turns
    config = LatencyFirstConfig(
        warmup_models=0, near_best=0.1, near_best_ms=5.0, starve_after_picks_per_pod=99
    )
    picker = LatencyFirstPicker(config)
    pods = [pod("a", pod_class="b200"), pod("c", pod_class="h200")]
    assert [picker.pick(SLO, pods, [p(100), p(108)], RNG).index for _ in range(4)] == [0, 1, 0, 1]


def test_predictor_down_uses_llm_ds_composite_score() -> None:
    # composite: a = (1 - 0.9 + 0 + 0) / 3; b = (1 - 0 + 1 + 0) / 3 -> b twice as likely...
    pods = [pod("a", kv_cache_percentage=0.9, num_request_waiting=4), pod("b")]
    picker = learned()
    rng = random.Random(3)
    picks = [picker.pick(SLO, pods, None, rng) for _ in range(400)]
    assert {c.rule for c in picks} == {"composite"}
    share_b = sum(c.index == 1 for c in picks) / len(picks)
    # ...weights 0.033 and 0.667: b wins about 95 % of the draws
    assert 0.9 < share_b < 0.99


def test_pods_without_a_prediction_are_skipped_and_bad_input_is_refused() -> None:
    pods = [pod("a"), pod("b")]
    got = learned().pick(SLO, pods, [None, p(400)], RNG)
    assert got.index == 1
    with pytest.raises(ValueError, match="2 pods"):
        learned().pick(SLO, pods, [p(1)], RNG)
    with pytest.raises(ValueError, match="no candidate"):
        learned().pick(SLO, [], None, RNG)
