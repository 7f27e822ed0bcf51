"""`latency-first` on a prefill/decode pool: our rules for each of llm-d's two profiles.

A split request's TTFT is made on its prefill pod (queue and prefill; the KV transfer
that follows is a function of the prompt alone, the same from every prefill pod, so it
cannot change which prefill pod is fastest) and its TPOT on its decode pod (its step
time under that pod's batch). So each profile ranks by its own target:

- **Prefill profile** (`prefill`): `LatencyFirstPicker` unchanged. Its tiers ignore TPOT
  on prefill pods (a prefill pod streams no tokens), so it picks the lowest predicted TTFT
  among the pods meeting the TTFT SLO, with its prefix affinity, band, starvation and
  warm-up rules.
- **Decode profile** (`decode`): the decider's outcome is known per candidate before the
  pick (from that pod's prefix score, `pd_splits`), so each decode pod is judged on what
  the request would get there. Tiers: meets the TPOT SLO (buffered by the tightest one
  running there, as llm-d's headroom) and, for a pod that would serve the request whole,
  the TTFT SLO too; then TPOT only; then neither. Within the best tier: a pod that would
  serve it whole (it holds the prompt: no prefill queue, no transfer) when there is one,
  the fastest TTFT of those; otherwise the decode pods within `tpot_near_best` of the
  lowest predicted TPOT, the least recently picked of them (TPOT predictions of pods
  with similar batches differ by noise; the least recent spreads the load). Warm-up
  (an unlearned model, `LatencyFirstPicker`'s rule 7): the fewest running requests.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from latency_client._headroom import buffered_tpot_slo
from latency_client._latency_first import (
    LatencyFirstConfig,
    LatencyFirstPicker,
    check_candidates,
    composite_pick,
)
from latency_client._pd import DEFAULT_PD_THRESHOLD, pd_splits
from latency_client._picker import Pick
from latency_client._types import PodState, Prediction, RequestInfo


@dataclass(frozen=True)
class PdLatencyFirstConfig:
    threshold: int = DEFAULT_PD_THRESHOLD  # the decider's, to know which pods would split
    tpot_near_best: float = 0.05  # relative band of "as fast as the lowest TPOT"
    tpot_near_best_ms: float = 0.5  # and an absolute floor (decode steps are ~20 ms)
    picker: LatencyFirstConfig = field(default_factory=LatencyFirstConfig)


@dataclass(frozen=True, slots=True)
class _Decode:
    index: int
    pod: PodState
    prediction: Prediction
    tier: int  # 0: meets what applies, 1: the TPOT SLO only, 2: not the TPOT SLO
    whole: bool  # the decider would not split the request on this pod


class PdLatencyFirstPicker:
    """One P/D pool's picker: `decode` and `prefill` have `latency_client.pick`'s first
    four arguments, so either can be a `choose_pd` profile picker."""

    def __init__(self, config: PdLatencyFirstConfig | None = None) -> None:
        self.config = config or PdLatencyFirstConfig()
        # the prefill profile's picker; its count of the versions seen is the decode
        # profile's warm-up too (one pool, one predictor)
        self.prefill_picker = LatencyFirstPicker(self.config.picker)
        self._picks = 0
        self._last_pick: dict[str, int] = {}  # decode pod name -> pick number

    def prefill(
        self,
        request: RequestInfo,
        pods: Sequence[PodState],
        predictions: Sequence[Prediction | None] | None,
        rng: random.Random,
    ) -> Pick:
        return self.prefill_picker.pick(request, pods, predictions, rng)

    def decode(
        self,
        request: RequestInfo,
        pods: Sequence[PodState],
        predictions: Sequence[Prediction | None] | None,
        rng: random.Random,
    ) -> Pick:
        check_candidates(pods, predictions)
        known = [
            (i, pod, p)
            for i, (pod, p) in enumerate(zip(pods, predictions or [None] * len(pods), strict=True))
            if p is not None
        ]
        if not known:  # predictor down: llm-d's composite fallback
            return self._chosen(composite_pick(pods, rng))
        first = known[0][2]
        if not self.prefill_picker.learned(first.model_version, first.tpot_model_splits):
            fewest = min(pod.running_requests for _, pod, _ in known)
            idle = [(i, pod, p) for i, pod, p in known if pod.running_requests == fewest]
            i, pod, p = min(idle, key=lambda o: self._last(o[1]))
            return self._chosen(Pick(pod, i, p, 1.0, "warmup"))
        options = [self._option(request, i, pod, p) for i, pod, p in known]
        best_tier = min(o.tier for o in options)
        feasible = [o for o in options if o.tier == best_tier]
        whole = [o for o in feasible if o.whole]
        if whole:
            chosen = min(whole, key=lambda o: (o.prediction.ttft_ms, self._last(o.pod)))
            rule = "whole"
        else:
            lowest = min(o.prediction.tpot_ms for o in feasible)
            limit = lowest * (1 + self.config.tpot_near_best) + self.config.tpot_near_best_ms
            band = [o for o in feasible if o.prediction.tpot_ms <= limit]
            chosen = min(band, key=lambda o: self._last(o.pod))
            rule = "tpot_band"
        if best_tier:
            rule += "_tpot_slo_missed" if best_tier == 2 else "_ttft_slo_missed"
        return self._chosen(Pick(chosen.pod, chosen.index, chosen.prediction, 1.0, rule))

    def _option(self, request: RequestInfo, index: int, pod: PodState, p: Prediction) -> _Decode:
        whole = not pd_splits(request, pod, self.config.threshold)
        tpot_ok = (
            request.tpot_slo_ms is None
            or not request.streaming
            or p.tpot_ms <= buffered_tpot_slo(request, pod, self.config.picker.slo_buffer_factor)
        )
        # a split request's TTFT is the prefill profile's to meet
        ttft_ok = not whole or request.ttft_slo_ms is None or p.ttft_ms <= request.ttft_slo_ms
        tier = (0 if ttft_ok else 1) if tpot_ok else 2
        return _Decode(index, pod, p, tier, whole)

    def _last(self, pod: PodState) -> int:
        return self._last_pick.get(pod.name, -1)

    def _chosen(self, chosen: Pick) -> Pick:
        self._picks += 1
        if chosen.pod is not None:
            self._last_pick[chosen.pod.name] = self._picks
        return chosen
