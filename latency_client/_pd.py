"""llm-d's prefill/decode (P/D) flow for a Python router: two profiles and a decider.

With P/D every pod carries a role (`PodState.pod_type` "prefill" or "decode"). llm-d's
endpoint picker schedules a request in two profiles. The decode profile runs first: one
bulk prediction call for the decode pods, then a pick among them. The decider then looks
at the chosen decode pod only: when the prompt tokens it lacks in its prefix cache reach
the threshold (llm-d's `nonCachedTokens`, 16 in its sample P/D config; 0 never splits),
the request is split and the prefill profile runs (one bulk call for the prefill pods, a
pick among them); otherwise the decode pod serves the request whole.

The tokens a pod lacks are estimated as the EPP does from what it knows per pod, the
prefix match: `round(prompt tokens x (1 - prefix_cache_score))` (`uncached_prompt_tokens`).

Either picker runs in each profile: llm-d's `pick` (the default) or ours
(`PdLatencyFirstPicker.decode` / `.prefill`, or a plain `LatencyFirstPicker.pick`); any
callable with `pick`'s first four arguments does.

Training rows (`pd_completion_rows`) follow llm-d's predicted-latency plugin: a split
request gives its TTFT row from the prefill pod (with the prefill pick's prediction) and
its TPOT row from the decode pod (with the decode pick's); a request served whole gives
both from the decode pod, as on a monolithic pool.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from latency_client._errors import PredictionUnavailable
from latency_client._headroom import prediction_rows
from latency_client._picker import Pick, pick
from latency_client._routing import completion_rows
from latency_client._types import PodState, Prediction, RequestInfo, Row

DEFAULT_PD_THRESHOLD = 16  # llm-d's sample P/D config (nonCachedTokens)

ProfilePicker = Callable[
    [RequestInfo, Sequence[PodState], Sequence[Prediction | None] | None, random.Random], Pick
]
Predict = Callable[[Sequence[Row]], Awaitable[list[Prediction]]]  # e.g. PredictorClient.predict


def uncached_prompt_tokens(request: RequestInfo, pod: PodState) -> int:
    """The prompt tokens `pod` lacks, estimated from its prefix match as the EPP does."""
    share = min(max(pod.prefix_cache_score, 0.0), 1.0)
    return round(request.input_token_length * (1.0 - share))


def pd_splits(request: RequestInfo, pod: PodState, threshold: int = DEFAULT_PD_THRESHOLD) -> bool:
    """The decider on a decode pod: split when it lacks >= `threshold` prompt tokens."""
    return threshold > 0 and uncached_prompt_tokens(request, pod) >= threshold


@dataclass(frozen=True, slots=True)
class PdPick:
    """One P/D decision: the decode pick (its pod None: shed by admission), the prefill
    pick when the request is split (None: served whole), and the decider's input."""

    decode: Pick
    prefill: Pick | None
    uncached_tokens: int

    @property
    def split(self) -> bool:
        return self.prefill is not None


async def _predict(
    predict: Predict, request: RequestInfo, pods: Sequence[PodState]
) -> list[Prediction] | None:
    try:
        return await predict(prediction_rows(request, pods))
    except PredictionUnavailable:
        return None  # the picker falls back to its composite score


async def choose_pd(
    predict: Predict,
    request: RequestInfo,
    decode_pods: Sequence[PodState],
    prefill_pods: Sequence[PodState],
    rng: random.Random,
    *,
    threshold: int = DEFAULT_PD_THRESHOLD,
    decode_picker: ProfilePicker = pick,
    prefill_picker: ProfilePicker = pick,
) -> PdPick:
    """Decode profile, decider, prefill profile (see the module docstring): at most two
    bulk prediction calls, never an exception for a missing prediction. Without prefill
    pods the decode pod serves every request whole."""
    if not decode_pods:
        raise ValueError("no decode pods")
    predictions = await _predict(predict, request, decode_pods)
    decode = decode_picker(request, decode_pods, predictions, rng)
    if decode.pod is None:
        return PdPick(decode, None, 0)
    missing = uncached_prompt_tokens(request, decode.pod)
    if not prefill_pods or not pd_splits(request, decode.pod, threshold):
        return PdPick(decode, None, missing)
    predictions = await _predict(predict, request, prefill_pods)
    prefill = prefill_picker(request, prefill_pods, predictions, rng)
    if prefill.pod is None:  # shed in the prefill profile: the decode pod prefills itself
        return PdPick(decode, None, missing)
    return PdPick(decode, prefill, missing)


def pd_completion_rows(
    request: RequestInfo,
    chosen: PdPick,
    *,
    ttft_ms: float,
    e2e_ms: float | None = None,
    output_tokens: int = 0,
) -> list[dict[str, object]]:
    """The training rows of a completed P/D request, as llm-d's plugin sends them (see
    the module docstring); `ttft_ms` is the request's whole TTFT (prefill queue, prefill,
    KV transfer and the first decode step), `e2e_ms` its end to end."""
    if chosen.decode.pod is None:
        raise ValueError("the request was shed: it has no rows")
    decode_rows = completion_rows(
        request,
        chosen.decode.pod,
        chosen.decode.prediction,
        ttft_ms=ttft_ms,
        e2e_ms=e2e_ms,
        output_tokens=output_tokens,
    )
    prefill = chosen.prefill
    if prefill is None or prefill.pod is None:  # served whole: both rows from the decode pod
        return decode_rows
    ttft_row = completion_rows(request, prefill.pod, prefill.prediction, ttft_ms=ttft_ms)[0]
    return [ttft_row, *decode_rows[1:]]  # the decode pod's TTFT row is not sent
