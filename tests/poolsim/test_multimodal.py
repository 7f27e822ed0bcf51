"""Multimodal traffic: the workload's shape, the encoder's time and cache per pod, the rows'
encoder sizes, token-load-per-class's multimodal settings and the oracle's look-ahead.
Real simulations on a few pods; no predictor."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from latency_client import prediction_row
from poolsim.command_args import add_arguments
from poolsim.encoder import ENCODER_MS_PER_TOKEN, ENCODER_SETUP_MS, EncoderCache, encode_ms
from poolsim.engine import Engine, RunResult, pod_features
from poolsim.hardware import A100, B200, H200
from poolsim.oracle import lookahead_ttft, ttft_lower_bound
from poolsim.pod import Pod
from poolsim.policies import make_policy
from poolsim.policy_api import BasePolicy, Observation, PodFeatures, PolicyOptions, RequestInfo
from poolsim.predicted import PredictedLatencyPolicy
from poolsim.predictor_servers import LocalPredictor, scaled_env
from poolsim.request import Completion, Request
from poolsim.token_load import TokenLoadPerClassPolicy, TokenLoadPolicy
from poolsim.workloads import IMAGES_PER_POD, RATE_PER_POD, generate
from tests.poolsim.helpers import SMALL

ROOMY = replace(SMALL, kv_blocks=1_000)
INFO = RequestInfo(id=0, arrival_s=0.0, input_tokens=1_000, slo_ttft_ms=None, slo_tpot_ms=None)


def image_request(
    rid: int, t: float, images: Sequence[tuple[int, int]], text: int = 40, output: int = 2
) -> Request:
    """A request with these (image id, vision tokens) images and `text` more prompt tokens;
    no prefix group, so only the encoder cache can tell a repeat."""
    ids = tuple(image for image, _ in images)
    tokens = tuple(size for _, size in images)
    return Request(rid, t, text + sum(tokens), output, image_ids=ids, image_tokens=tokens)


def simulate(reqs: Sequence[Request], pods: int = 1, policy: str = "round-robin") -> RunResult:
    return asyncio.run(Engine(reqs, pods, ROOMY, make_policy(policy, 0)).run())


def ttfts(result: RunResult) -> dict[int, float]:
    return {done.request.id: done.ttft_ms for done in result.completions}


# ---- the workload


def test_the_workload_carries_images_from_a_popular_catalogue() -> None:
    reqs = generate("multimodal", 4, 300.0, 0)
    with_images = [r for r in reqs if r.image_ids]
    assert len(with_images) / len(reqs) == pytest.approx(0.40, abs=0.03)
    assert Counter(len(r.image_ids) for r in with_images).keys() == {1, 2, 3, 4}
    sizes: dict[int, int] = {}
    for r in with_images:
        assert len(set(r.image_ids)) == len(r.image_ids)  # distinct within a request
        assert all(0 <= image < 4 * IMAGES_PER_POD for image in r.image_ids)
        assert all(256 <= tokens <= 2_500 for tokens in r.image_tokens)
        for image, tokens in zip(r.image_ids, r.image_tokens, strict=True):
            assert sizes.setdefault(image, tokens) == tokens  # a size per catalogue image
        # images lead the prompt: the first one's tokens are its shared KV prefix
        assert r.prefix_group == r.image_ids[0] and r.prefix_tokens == r.image_tokens[0]
        assert r.input_tokens > r.encoder_tokens  # the text follows
        assert r.slo_ttft_ms == (1000.0 if r.encoder_tokens <= 2048 else 3000.0)
    assert 600 < statistics.median(sizes.values()) < 1_000  # median 800 before clipping
    # Zipf popularity: images recur, the most popular ones a lot
    seen = Counter(image for r in with_images for image in r.image_ids)
    assert sum(seen.values()) > 3 * len(seen) and seen.most_common(1)[0][1] > 100
    text_only = [r for r in reqs if not r.image_ids]
    assert all(r.prefix_group is None and r.slo_ttft_ms == 300.0 for r in text_only)
    assert statistics.median(r.input_tokens for r in text_only) == pytest.approx(167, rel=0.15)
    assert {r.slo_tpot_ms for r in reqs} == {60.0}


def test_the_rate_is_the_tables() -> None:
    count = len(generate("multimodal", 4, 300.0, 0))
    assert count == pytest.approx(RATE_PER_POD["multimodal"] * 4 * 300.0, rel=0.1)


def test_a_request_checks_its_images() -> None:
    with pytest.raises(ValueError, match="one token count per image"):
        Request(0, 0.0, 100, 1, image_ids=(1, 2), image_tokens=(10,))
    with pytest.raises(ValueError, match="exceed the prompt"):
        Request(0, 0.0, 100, 1, image_ids=(1,), image_tokens=(101,))
    assert Request(0, 0.0, 100, 1).encoder_tokens == 0


# ---- the encoder: time and cache


def test_encoder_time_is_linear_in_tokens_and_scaled_by_compute_speed() -> None:
    h200 = encode_ms(H200, [1_000, 256])
    assert h200 == pytest.approx(2 * ENCODER_SETUP_MS + ENCODER_MS_PER_TOKEN * 1_256)
    assert encode_ms(H200, [2_691]) == pytest.approx(167.0, abs=0.5)  # vLLM #41267's 1080p
    assert encode_ms(B200, [1_000, 256]) == pytest.approx(h200 / 2.25)
    assert encode_ms(A100, [1_000, 256]) == pytest.approx(h200 * 1.585)
    assert encode_ms(H200, []) == 0.0


def test_the_encoder_cache_is_an_lru_in_vision_tokens() -> None:
    cache = EncoderCache(capacity_tokens=3_000)
    first = image_request(0, 0.0, [(1, 1_000), (2, 1_000)])
    assert cache.admit(first) == [1_000, 1_000]
    assert cache.admit(first) == []  # both cached now
    assert cache.matched_tokens(image_request(1, 0.0, [(2, 1_000), (3, 500)])) == 1_000
    assert cache.missing(image_request(1, 0.0, [(2, 1_000), (3, 500)])) == [500]
    cache.admit(image_request(2, 0.0, [(1, 1_000)]))  # touched: image 2 is the oldest
    assert cache.admit(image_request(3, 0.0, [(4, 1_500)])) == [1_500]  # evicts image 2
    assert list(cache.entries) == [1, 4] and cache.used == 2_500
    assert cache.admit(image_request(4, 0.0, [(5, 4_000)])) == [4_000]  # too big to keep
    assert 5 not in cache.entries


def test_encoder_time_is_added_and_a_cache_hit_skips_it() -> None:
    images = [(7, 1_000), (8, 600)]
    cold = image_request(0, 0.0, images)
    warm = image_request(1, 5.0, images)  # the same images, once the first has finished
    result = simulate([cold, warm])
    got = ttfts(result)
    spent = encode_ms(ROOMY, [1_000, 600])
    assert got[0] - got[1] == pytest.approx(spent, abs=1e-6)
    # the same prompt without images: the cold request's TTFT less the encoder time
    text = Request(0, 0.0, cold.input_tokens, 2)
    assert ttfts(simulate([text]))[0] == pytest.approx(got[0] - spent, abs=1e-6)
    pod = result.pods[0]
    assert pod.encoder_tokens == 3_200 and pod.encoder_hit_tokens == 1_600
    assert pod.encode_ms_total == pytest.approx(spent)
    # the same request cold again on a fresh pod: the first one's TTFT
    assert ttfts(simulate([replace(warm, arrival_s=0.0)]))[1] == pytest.approx(got[0], abs=1e-9)


def test_only_the_uncached_images_are_encoded() -> None:
    reqs = [image_request(0, 0.0, [(1, 800)]), image_request(1, 5.0, [(1, 800), (2, 400)])]
    got = ttfts(simulate(reqs))
    alone = ttfts(simulate([replace(reqs[1], arrival_s=0.0)]))[1]
    assert alone - got[1] == pytest.approx(encode_ms(ROOMY, [800]), abs=1e-6)


def test_a_cache_is_per_pod() -> None:
    # round-robin: the repeat goes to the other pod, whose cache is cold
    reqs = [image_request(0, 0.0, [(3, 900)]), image_request(1, 5.0, [(3, 900)])]
    result = simulate(reqs, pods=2)
    got = ttfts(result)
    assert got[0] == pytest.approx(got[1], abs=1e-9)
    assert [pod.encoder_hit_tokens for pod in result.pods] == [0, 0]
    assert [pod.encoder_tokens for pod in result.pods] == [900, 900]


# ---- the rows


def test_rows_carry_the_request_size_and_each_pods_cached_part() -> None:
    warm, cold = Pod(0, ROOMY), Pod(1, ROOMY)
    warm.encoder.admit(image_request(9, 0.0, [(1, 700), (2, 300)]))
    request = image_request(5, 0.0, [(1, 700), (3, 500)])
    rows = [pod_features(pod, request) for pod in (warm, cold)]
    sizes = [(f.encoder_input_size, f.encoder_matched_size) for f in rows]
    assert sizes == [(1200, 700), (1200, 0)]
    row = rows[0].row()
    assert row["encoder_input_size"] == 1200 and row["encoder_matched_size"] == 700
    assert list(warm.encoder.entries) == [1, 2]  # the row's look did not touch the LRU
    # a text-only request: both 0, the servers' defaults (llm-d's EPP sends them so too)
    text = pod_features(warm, Request(6, 0.0, 300, 4)).row()
    assert text["encoder_input_size"] == 0 and text["encoder_matched_size"] == 0
    # the training rows carry them as routed
    done = Completion(request, 0, 0.0, 0.2, 1.0, 200.0, 100.0, 1000.0, 0, 0)
    for sent in Observation(done, rows[0]).training_rows():
        assert sent["encoder_input_size"] == 1200 and sent["encoder_matched_size"] == 700


def test_the_predicted_policies_pass_the_sizes_to_the_picker_and_the_servers() -> None:
    features = PodFeatures(0.1, 1200, 0, 1, 1, 0, 0, 0.0, encoder_input_size=1200)
    warm = replace(features, encoder_matched_size=700)
    policy = PredictedLatencyPolicy(PolicyOptions(seed=0, multimodal=True))
    state = policy._state("", 0, warm)
    assert state.encoder_matched_size == 700
    # latency_client builds the same encoder fields from its PodState / RequestInfo
    from latency_client import RequestInfo as PickerRequest

    picker_row = prediction_row(PickerRequest(1200, encoder_input_size=1200), state)
    assert picker_row["encoder_input_size"] == warm.row()["encoder_input_size"] == 1200
    assert picker_row["encoder_matched_size"] == warm.row()["encoder_matched_size"] == 700
    # the servers started for a multimodal run have the encoder features on
    assert LocalPredictor(5.0, encoder=True).env["LATENCY_ENABLE_ENCODER_FEATURES"] == "true"
    assert "LATENCY_ENABLE_ENCODER_FEATURES" not in scaled_env(Path("."), 5.0)


class Recorder(BasePolicy):
    """Round-robin, keeping every row it was offered."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[RequestInfo, list[PodFeatures]]] = []

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        self.seen.append((request, list(pods)))
        return len(self.seen) % len(pods)


def test_a_run_offers_the_encoder_sizes_per_pod() -> None:
    reqs = generate("multimodal", 2, 30.0, 1)
    recorder = Recorder()
    asyncio.run(Engine(reqs, 2, H200, recorder, regret=False).run())
    by_id = {r.id: r for r in reqs}
    matched = 0
    for info, pods in recorder.seen:
        size = by_id[info.id].encoder_tokens
        assert info.encoder_input_size == size
        assert all(p.encoder_input_size == size for p in pods)
        assert all(0 <= p.encoder_matched_size <= size for p in pods)
        matched += sum(p.encoder_matched_size > 0 for p in pods)
    assert matched > 10  # popular images are found cached


# ---- token-load-per-class on multimodal traffic


def pod(prefix: float, tokens: int) -> PodFeatures:
    return PodFeatures(0.0, 1_000, 0, 0, 1, 0, 0, prefix, tokens, "h200")


def test_token_load_per_class_takes_llm_ds_multimodal_settings_only_there() -> None:
    plain = make_policy("token-load-per-class", 0, options=PolicyOptions(seed=0))
    multi = make_policy("token-load-per-class", 0, options=PolicyOptions(seed=0, multimodal=True))
    assert isinstance(plain, TokenLoadPerClassPolicy) and isinstance(multi, TokenLoadPerClassPolicy)
    assert (plain.tau, plain.gap_ms) == (0.80, 18_000.0)
    assert (multi.tau, multi.gap_ms) == (0.6, 36_000.0)
    # a 0.7 prefix score is sticky at 0.6 only: the warm pod wins despite its queue
    pods = [pod(0.7, 2_000), pod(0.0, 0)]
    assert multi.choose(INFO, pods, 0.0) == 0 and plain.choose(INFO, pods, 0.0) == 1
    # a warm pod ~26 s behind (200,000 tokens at ~7,692 tokens/s) stays sticky within 36 s
    far = [pod(0.9, 200_000), pod(0.0, 0)]
    assert multi.choose(INFO, far, 0.0) == 0 and plain.choose(INFO, far, 0.0) == 1
    # plain token-load is llm-d's, whatever the workload
    token_load = make_policy("token-load", 0, options=PolicyOptions(seed=0, multimodal=True))
    assert isinstance(token_load, TokenLoadPolicy)
    token_load.attach([Pod(0, H200)], {})
    assert token_load.choose(INFO, pods, 0.0) == 1


def test_the_command_sets_multimodal_from_the_requests(tmp_path: Path) -> None:
    from poolsim.command import run

    for workload, images in (("multimodal", True), ("chat", False)):
        out = tmp_path / f"{workload}.json"
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        args = parser.parse_args(
            [
                *("--workload", workload, "--pods", "2", "--duration", "10"),
                *("--policies", "token-load-per-class", "--no-progress", "--json", str(out)),
            ]
        )
        assert run(args) == 0
        figures = json.loads(out.read_text())["policies"]["token-load-per-class"]
        assert ("encoder" in figures) is images
        if images:
            assert 0.0 < figures["encoder"]["hit_rate"] < 1.0
            assert len(figures["encoder"]["encode_s_per_pod"]) == 2


# ---- the oracle


def test_the_oracles_look_ahead_counts_the_encoder_and_its_cache() -> None:
    warm, cold = Pod(0, ROOMY), Pod(1, ROOMY)
    warm.encoder.admit(image_request(9, 0.0, [(1, 1_000)]))
    request = image_request(5, 0.0, [(1, 1_000), (2, 500)])
    got = [lookahead_ttft(p, request, 0.0, float("inf")) for p in (warm, cold)]
    assert (got[1] - got[0]) * 1000.0 == pytest.approx(encode_ms(ROOMY, [1_000]), abs=1e-6)
    assert list(warm.encoder.entries) == [1] and not cold.encoder.entries  # untouched
    for built, ttft in zip((warm, cold), got, strict=True):
        assert ttft_lower_bound(built, request, 0.0) <= ttft + 1e-12
    # exact for a lone request: the engine measures what the look-ahead said
    measured = ttfts(simulate([request]))[5]
    assert measured == pytest.approx(got[1] * 1000.0 + ROOMY.overhead_ms, abs=1e-6)


def test_the_oracle_has_no_regret_on_multimodal_traffic() -> None:
    reqs = generate("multimodal", 2, 20.0, 2)
    result = asyncio.run(Engine(reqs, 2, H200, make_policy("oracle", 0)).run())
    assert not result.unfinished and result.regrets
    assert all(regret == 0.0 for _, regret in result.regrets)
