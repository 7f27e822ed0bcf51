"""`latency-first`: our own picker (latency_client.LatencyFirstPicker) on our real predictor,
in the same closed loop as `predicted-latency` (poolsim.predicted.PredictorPolicy): the same
prediction rows, training rows back, served-p90 scores and model-age guard; only the pick
differs. Its rules are in latency_client/_latency_first.py. `latency-first-noclass` is the
same without `pod_class` in its rows (see poolsim.predicted).

On a prefill/decode pool (poolsim.roles) each of llm-d's profiles picks by our P/D rules
(latency_client.PdLatencyFirstPicker: the decode profile by the predicted TPOT, and the
TTFT of pods that would serve the request whole; the prefill profile by the predicted
TTFT), with the run's decider threshold."""

from __future__ import annotations

from latency_client import (
    LatencyFirstConfig,
    LatencyFirstPicker,
    PdLatencyFirstConfig,
    PdLatencyFirstPicker,
    Pick,
    PodState,
    Prediction,
)
from latency_client import RequestInfo as PickerRequest
from poolsim.policy_api import PolicyOptions
from poolsim.predicted import PredictorPolicy
from poolsim.roles import DECODE, PREFILL


class LatencyFirstPolicy(PredictorPolicy):
    name = "latency-first"

    def __init__(
        self,
        options: PolicyOptions,
        config: LatencyFirstConfig | None = None,
        *,
        pod_class: bool = True,
        name: str = "latency-first",
    ) -> None:
        super().__init__(options)
        self.picker = LatencyFirstPicker(config)
        self.pd = PdLatencyFirstPicker(
            PdLatencyFirstConfig(options.pd_threshold, picker=config or LatencyFirstConfig())
        )
        self.sends_pod_class = pod_class
        self.name = name

    def decide(
        self,
        request: PickerRequest,
        pods: list[PodState],
        predictions: list[Prediction] | None,
        profile: str,
    ) -> Pick:
        if profile == DECODE:
            return self.pd.decode(request, pods, predictions, self.rng)
        if profile == PREFILL:
            return self.pd.prefill(request, pods, predictions, self.rng)
        return self.picker.pick(request, pods, predictions, self.rng)
