"""The P/D flow of latency_client (choose_pd, the decider, pd_completion_rows) and our
P/D rules (PdLatencyFirstPicker): hand-worked cases, and the flow against real servers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path

from latency_client import (
    LatencyFirstConfig,
    PdLatencyFirstConfig,
    PdLatencyFirstPicker,
    PdPick,
    Pick,
    PodState,
    Prediction,
    PredictorClient,
    RequestInfo,
    Row,
    choose_pd,
    completion_rows,
    pd_completion_rows,
    pd_splits,
    uncached_prompt_tokens,
)
from tests.latency_client.cluster import running_cluster

RNG = random.Random(0)
REQUEST = RequestInfo(1000, ttft_slo_ms=500.0, tpot_slo_ms=30.0)


def decode(name: str, prefix: float = 0.0, **fields: object) -> PodState:
    return PodState(name, prefix_cache_score=prefix, pod_type="decode", **fields)  # type: ignore[arg-type]


def prefill(name: str, **fields: object) -> PodState:
    return PodState(name, pod_type="prefill", **fields)  # type: ignore[arg-type]


def p(ttft: float, tpot: float = 20.0) -> Prediction:
    return Prediction(ttft, tpot, "v1")


def learned() -> PdLatencyFirstPicker:
    return PdLatencyFirstPicker(PdLatencyFirstConfig(picker=LatencyFirstConfig(warmup_models=0)))


def test_the_decider_reads_the_prefix_score_as_the_epp_estimates_it() -> None:
    # 1000 tokens, 98.5 % cached -> 15 uncached < 16: whole; 98.4 % -> 16: split
    assert uncached_prompt_tokens(REQUEST, decode("a", 0.985)) == 15
    assert not pd_splits(REQUEST, decode("a", 0.985))
    assert pd_splits(REQUEST, decode("a", 0.984))
    assert pd_splits(REQUEST, decode("a", 0.5), threshold=500)
    assert not pd_splits(REQUEST, decode("a", 0.0), threshold=0)  # 0: never split


def test_a_split_request_gives_its_ttft_row_from_the_prefill_pod_and_tpot_from_decode() -> None:
    d, f = decode("d1", running_requests=3), prefill("p1", num_request_waiting=2)
    chosen = PdPick(
        Pick(d, 0, p(400, 25), 1.0, "positive"), Pick(f, 0, p(300, 0), 1.0, "positive"), 1000
    )
    rows = pd_completion_rows(REQUEST, chosen, ttft_ms=350.0, e2e_ms=2350.0, output_tokens=101)
    ttft_row, tpot_row = rows
    # the TTFT row: the prefill pod's features and prediction, the request's whole TTFT
    assert ttft_row == completion_rows(REQUEST, f, p(300, 0), ttft_ms=350.0)[0]
    assert ttft_row["pod_type"] == "prefill" and ttft_row["predicted_ttft_ms"] == 300.0
    # the TPOT row: the decode pod's, (2350 - 350) / 100 = 20 ms
    assert tpot_row["pod_type"] == "decode" and tpot_row["actual_tpot_ms"] == 20.0
    assert tpot_row["predicted_tpot_ms"] == 25.0 and tpot_row["num_request_running"] == 3


def test_a_request_served_whole_gives_both_rows_from_the_decode_pod() -> None:
    d = decode("d1", 1.0)
    chosen = PdPick(Pick(d, 0, p(120, 22), 1.0, "positive"), None, 0)
    rows = pd_completion_rows(REQUEST, chosen, ttft_ms=110.0, e2e_ms=2110.0, output_tokens=101)
    assert rows == completion_rows(
        REQUEST, d, p(120, 22), ttft_ms=110.0, e2e_ms=2110.0, output_tokens=101
    )
    assert [row["pod_type"] for row in rows] == ["decode", "decode"]


def test_decode_profile_picks_the_lowest_tpot_band_then_the_least_recent() -> None:
    picker = learned()
    pods = [decode("a"), decode("b"), decode("c")]
    # TPOTs 25, 20, 20.4: band = 20 x 1.05 + 0.5 = 21.5 -> b and c; neither picked yet -> b
    first = picker.decode(REQUEST, pods, [p(900, 25), p(900, 20), p(900, 20.4)], RNG)
    assert (first.index, first.rule) == (1, "tpot_band")  # TTFT 900 > 500 ignored: split
    # same answers again: b was picked last, c has not been -> c
    second = picker.decode(REQUEST, pods, [p(900, 25), p(900, 20), p(900, 20.4)], RNG)
    assert second.index == 2


def test_decode_profile_tiers_by_the_tpot_slo() -> None:
    # SLO 30: a 35 (misses), b 28 -> b even though a's batch is emptier by TTFT
    pods = [decode("a"), decode("b")]
    got = learned().decode(REQUEST, pods, [p(100, 35), p(900, 28)], RNG)
    assert (got.index, got.rule) == (1, "tpot_band")
    # nobody meets 30 -> the lowest TPOT of all, marked
    got = learned().decode(REQUEST, pods, [p(100, 45), p(900, 40)], RNG)
    assert (got.index, got.rule) == (1, "tpot_band_tpot_slo_missed")


def test_decode_profile_prefers_a_pod_that_serves_the_request_whole() -> None:
    # b holds the prompt (1000 x (1 - 0.99) = 10 < 16: no split), its TTFT 200 <= 500 and
    # TPOT 28 <= 30 meet both -> b, though a's TPOT is lower
    pods = [decode("a", 0.0), decode("b", 0.99)]
    got = learned().decode(REQUEST, pods, [p(900, 20), p(200, 28)], RNG)
    assert (got.index, got.rule) == (1, "whole")
    # whole on b would miss the TTFT SLO (800 > 500): a lower tier, so a (split) wins
    got = learned().decode(REQUEST, pods, [p(900, 20), p(800, 28)], RNG)
    assert (got.index, got.rule) == (0, "tpot_band")


def test_decode_profile_warms_up_on_the_fewest_running_requests() -> None:
    picker = PdLatencyFirstPicker()  # the prior answers: warm-up
    pods = [decode("a", running_requests=4), decode("b", running_requests=1)]
    prior = [Prediction(50, 5, "cold-start-prior")] * 2
    got = picker.decode(REQUEST, pods, prior, RNG)
    assert (got.index, got.rule) == (1, "warmup")


def test_decode_profile_warms_up_while_the_tpot_model_has_no_splits() -> None:
    # the decode profile ranks by TPOT: a version whose TPOT model is a constant (0 splits)
    # is warm-up there, even with TTFT trees; one with TPOT trees ranks by TPOT (a)
    pods = [decode("a", running_requests=4), decode("b", running_requests=1)]
    constant = [Prediction(900, 20, "v2", 50, 0), Prediction(900, 28, "v2", 50, 0)]
    got = learned().decode(REQUEST, pods, constant, RNG)
    assert (got.index, got.rule) == (1, "warmup")
    trees = [Prediction(900, 20, "v3", 50, 40), Prediction(900, 28, "v3", 50, 40)]
    assert learned().decode(REQUEST, pods, trees, RNG).index == 0


def test_prefill_profile_ranks_by_ttft_and_ignores_tpot() -> None:
    # a prefill pod streams no tokens: b's TPOT 90 > 30 does not count; no cache anywhere,
    # so the band within 300 x 1.1 + 5 = 335 ms of the fastest holds b only -> b
    pods = [prefill("a"), prefill("b")]
    got = learned().prefill(REQUEST, pods, [p(450, 10), p(300, 90)], RNG)
    assert (got.index, got.rule) == (1, "least_recent")


class Counted:
    """The real client's predict, with each call's rows kept (how many bulk calls)."""

    def __init__(self, client: PredictorClient) -> None:
        self.client = client
        self.calls: list[list[Row]] = []

    async def __call__(self, rows: Sequence[Row]) -> list[Prediction]:
        self.calls.append(list(rows))
        return await self.client.predict(rows)


def test_the_flow_against_real_servers_one_bulk_call_per_profile(tmp_path: Path) -> None:
    decoders = [decode("d0"), decode("d1", 0.995), decode("d2")]
    prefillers = [prefill("p0"), prefill("p1", num_request_waiting=3)]
    with running_cluster(tmp_path, predictors=1, LATENCY_RETRAINING_INTERVAL_SEC="3600") as cluster:

        async def flow() -> tuple[list[PdPick], list[list[str]]]:
            async with PredictorClient(cluster.prediction_urls, cluster.trainer.url) as client:
                counted = Counted(client)
                rng = random.Random(3)
                ours = PdLatencyFirstPicker()
                picks = []
                for pods in (decoders, decoders[1:2]):  # any pods, then only d1 (cached)
                    picks.append(await choose_pd(counted, REQUEST, pods, prefillers, rng))
                picks.append(
                    await choose_pd(
                        counted,
                        REQUEST,
                        decoders[::2],
                        prefillers,
                        rng,
                        decode_picker=ours.decode,
                        prefill_picker=ours.prefill,
                    )
                )
                types = [[str(row["pod_type"]) for row in call] for call in counted.calls]
                return picks, types

        picks, types = asyncio.run(flow())
    llm_d, cached, ours = picks
    # llm-d's picker on d0-d2: whichever it drew, a pod without the prefix splits
    assert llm_d.split == (llm_d.decode.pod is not None and llm_d.decode.pod.name != "d1")
    assert not cached.split and cached.uncached_tokens == 5  # 1000 x 0.005
    assert ours.split and ours.prefill is not None and ours.prefill.pod is not None
    assert ours.decode.rule == "warmup" and ours.prefill.pod.name in {"p0", "p1"}
    # one bulk call per profile that ran: decode rows first, then prefill rows
    calls = [["decode"] * 3] + ([["prefill"] * 2] if llm_d.split else [])
    calls += [["decode"], ["decode"] * 2, ["prefill"] * 2]
    assert types == calls
