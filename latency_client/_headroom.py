"""Picker step 1 (docs/picker.md section 1): one prediction row per candidate pod,
and each pod's headroom against the request's SLOs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from latency_client._types import PodState, Prediction, RequestInfo


class Headroom(NamedTuple):  # tuples: the picker makes one per pod per request
    ttft_ms: float
    tpot_ms: float

    @property
    def positive(self) -> bool:
        return self.ttft_ms >= 0 and self.tpot_ms >= 0


class Candidate(NamedTuple):
    """A pod as the filters and the scorer see it; `pod_index` is its place in the pod list,
    `positive` whether both headrooms are >= 0 (never without a prediction)."""

    pod_index: int
    pod: PodState
    prediction: Prediction | None
    headroom: Headroom | None  # None: no prediction for this pod
    positive: bool


def prediction_row(request: RequestInfo, pod: PodState) -> dict[str, object]:
    """The features llm-d sends for one candidate; generated tokens and decode tokens in
    flight are its prediction-time constants (1 and 0). Our `pod_class` is added only when
    the pod has one: without it the row is byte for byte the one llm-d sends."""
    row: dict[str, object] = {
        "kv_cache_percentage": pod.kv_cache_percentage,
        "input_token_length": request.input_token_length,
        "num_request_waiting": pod.num_request_waiting,
        "num_request_running": pod.running_requests,
        "num_tokens_generated": 1,
        "prefix_cache_score": pod.prefix_cache_score,
        "pod_type": pod.pod_type,
        "prefill_tokens_in_flight": pod.prefill_tokens_in_flight,
        "decode_tokens_in_flight": 0,
        "encoder_matched_size": pod.encoder_matched_size,
        "encoder_input_size": request.encoder_input_size,
    }
    if pod.pod_class:
        row["pod_class"] = pod.pod_class
    return row


def prediction_rows(request: RequestInfo, pods: Sequence[PodState]) -> list[dict[str, object]]:
    return [prediction_row(request, pod) for pod in pods]


def buffered_tpot_slo(request: RequestInfo, pod: PodState, buffer_factor: float) -> float:
    """The request's TPOT SLO times the buffer factor, lowered to the tightest TPOT SLO
    (times the same factor) of the requests already running on the pod."""
    slo = (request.tpot_slo_ms or 0.0) * buffer_factor
    running = [s for s in pod.running_tpot_slos_ms if s > 0]
    return min(slo, min(running) * buffer_factor) if running else slo


def headroom(
    request: RequestInfo, pod: PodState, prediction: Prediction, buffer_factor: float = 1.0
) -> Headroom:
    """SLO minus prediction per target (an absent SLO counts as 0). TPOT does not apply to
    non-streaming requests or prefill pods: headroom 0, counted as met."""
    ttft = (request.ttft_slo_ms or 0.0) - prediction.ttft_ms
    if not request.streaming or pod.pod_type == "prefill":
        tpot = 0.0
    elif pod.running_tpot_slos_ms:
        tpot = buffered_tpot_slo(request, pod, buffer_factor) - prediction.tpot_ms
    else:  # the common case, without the running-SLO scan
        tpot = (request.tpot_slo_ms or 0.0) * buffer_factor - prediction.tpot_ms
    return tuple.__new__(Headroom, (ttft, tpot))  # called per pod on every pick


def candidates(
    request: RequestInfo,
    pods: Sequence[PodState],
    predictions: Sequence[Prediction | None] | None,
    buffer_factor: float = 1.0,
) -> list[Candidate]:
    """`predictions`: one per pod in the same order, None for a pod without one, or None
    for all (the predictor is down)."""
    if predictions is None:
        return [Candidate(i, pod, None, None, False) for i, pod in enumerate(pods)]
    if len(predictions) != len(pods):
        raise ValueError(f"{len(predictions)} predictions for {len(pods)} pods")
    make = tuple.__new__  # no Python-level __new__: this runs for every pod of every pick
    out: list[Candidate] = []
    for i, (pod, p) in enumerate(zip(pods, predictions, strict=True)):
        if p is None:
            out.append(make(Candidate, (i, pod, None, None, False)))
        else:
            h = headroom(request, pod, p, buffer_factor)
            out.append(make(Candidate, (i, pod, p, h, h.ttft_ms >= 0 and h.tpot_ms >= 0)))
    return out
