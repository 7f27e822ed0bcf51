"""`predicted-latency`: llm-d's predicted-latency picker on our real predictor, closed loop.

`PredictorPolicy` is the loop itself, shared with `latency-first` (poolsim.latency_first):
everything below but the pick, which a subclass's `decide` makes.

Per request, the EPP's row for every pod (`PodFeatures.row()`) goes to the prediction
servers in one /predict/bulk/strict call (latency_client's PredictorClient), and
`latency_client.pick` runs llm-d's pipeline on the answers: prefix affinity (strict,
then loose), the SLO headroom tiers with the request's `slo_ttft_ms` / `slo_tpot_ms`
(absent: 0), the latency scorer and the weighted-random pick (a seeded rng). Every
completed request goes back to the trainer as the EPP sends it
(`Observation.training_rows()` with the `predicted_*` of the prediction acted on). When no
prediction comes (any `PredictionUnavailable`) the pick falls back to the picker's
composite score, as llm-d does, and the fallback is counted.

In a pool mixing hardware classes (`--hardware h200:4,b200:4`) every row carries our
`pod_class` (the pod's class), so the models can tell the classes apart; the `-noclass`
variants (`predicted-latency-noclass`, `latency-first-noclass`) send none, as llm-d's EPP
does today. A pool of one class sends none either way (the rows llm-d sends); a pool that
becomes mixed when pods join it (`--join`, poolsim.pool_changes) counts as mixed from the
start, as its pods' classes are known from the pool's spec. The served TTFT p90s are also
scored per class of the chosen pod (summary keys `served_ttft_coverage@CLASS`,
`served_ttft_rows@CLASS`; poolsim.metrics.by_pod_class).

A multimodal workload's rows carry llm-d's encoder features (`encoder_input_size`, the
request's vision tokens; `encoder_matched_size`, those the pod's encoder cache holds), in
the prediction rows, the training rows and the picker's PodState / RequestInfo; the
servers started for such a run get LATENCY_ENABLE_ENCODER_FEATURES=true
(`PolicyOptions.multimodal`, poolsim.predictor_servers).

On a prefill/decode pool (`--roles`, poolsim.roles) the policy is asked once per profile
(decode, then prefill for a split request), each time with one bulk call for that role's
pods, whose rows carry their `pod_type`; each pick is kept per (request, profile) until
its own observation arrives: the prefill pod's (a TTFT row, its prediction scored against
the request's TTFT) and the decode pod's (a TPOT row scored against its TPOT; for a
request it served whole, TTFT as well). Those scores are also per role (summary keys
`served_ttft_coverage@prefill`, `served_tpot_coverage@decode`, ...; poolsim.metrics_pd).

Simulated time stands still while a pick waits for a model that is more than
`max_model_age_s` simulated seconds old (poolsim.model_age says why: a busy machine
would otherwise make the retrain cadence depend on its load).

The predictor is ours, started for the run (`LocalPredictor`, its time constants divided
by the speedup), or any at given URLs (then nothing is started). The client's own time
constants (flush interval, back-off) are divided by the speedup too. Simulated time stands
still while a prediction call is in flight, so its wall time never shows in a simulated
latency; the deadline is therefore wide (`DEADLINE_S`): a timeout would only measure how
loaded the machine running the simulation is.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import httpx

from latency_client import (
    ClientConfig,
    ClientStats,
    Pick,
    PickerConfig,
    PodState,
    Prediction,
    PredictionTimeout,
    PredictionUnavailable,
    PredictorClient,
    pick,
)
from latency_client import RequestInfo as PickerRequest
from poolsim.hardware import is_mixed
from poolsim.model_age import ModelAgeGuard
from poolsim.policy_api import BasePolicy, Observation, PodFeatures, PolicyOptions, RequestInfo
from poolsim.prediction_quality import RoleScores, ServedScores, TargetScore
from poolsim.predictor_servers import LocalPredictor
from poolsim.request import Request
from poolsim.roles import DECODE, PREFILL

if TYPE_CHECKING:
    from poolsim.pod import Pod

DEADLINE_S = 5.0  # per pick, wall time (see the module docstring)
ATTEMPT_TIMEOUT_S = 2.0


def client_config(speedup: float) -> ClientConfig:
    """The EPP's defaults with the loop's time constants on the simulated clock."""
    return ClientConfig(
        deadline_s=DEADLINE_S,
        attempt_timeout_s=ATTEMPT_TIMEOUT_S,
        flush_interval_s=1.0 / speedup,
        max_flush_backoff_s=4.0 / speedup,
        backoff_s=1.0 / speedup,
        max_backoff_s=30.0 / speedup,
    )


class PredictorPolicy(BasePolicy):
    """The closed loop shared by the pickers that ask our predictor: predictions per pick,
    training rows back, served-p90 scores, the model-age guard. Subclasses decide."""

    name = "predictor"
    paced = True
    sends_pod_class = True  # in a mixed pool; False: the -noclass variants

    def __init__(self, options: PolicyOptions) -> None:
        self.options = options
        self.with_class = False  # rows carry pod_class: a mixed pool and sends_pod_class
        self.class_ttft: dict[str, TargetScore] = {}  # served TTFT p90s per chosen class
        self.use_slos = True  # False: the picker sees no SLO on any request
        self.rng = random.Random(options.seed)
        self.local: LocalPredictor | None = None
        self.client: PredictorClient | None = None
        self.scores = ServedScores()
        self.rules: Counter[str] = Counter()
        self.fallbacks = 0
        self.timeouts = 0
        # per pick until its observation: (request id, profile) -> the prediction acted on,
        # the pod (its index in that profile's list) and its class. A split request of a
        # P/D pool has two picks, observed one by one (poolsim.policy_api).
        self.pending: dict[tuple[int, str], tuple[Prediction | None, int, str]] = {}
        self.tpot_slos: dict[tuple[str, int], Counter[float]] = {}  # (profile, pod): SLOs
        self.roles = RoleScores()  # P/D: served p90s per role
        self.stored_at_end: int | None = None
        self.client_stats: ClientStats | None = None
        self.completed = 0
        self.guard = ModelAgeGuard(options.speedup, options.max_model_age_s)

    def attach(self, pods: Sequence[Pod], requests: Mapping[int, Request]) -> None:
        self.with_class = self.sends_pod_class and is_mixed([pod.hw for pod in pods])

    async def start(self, speedup: float | None) -> None:
        speedup = speedup or self.options.speedup
        self.guard.speedup = speedup
        training_url: str | None = self.options.training_url
        urls: Sequence[str] = self.options.prediction_urls
        if not urls:
            # started on the loop's thread: a cancelled run (SIGTERM) can never leave a
            # server starting behind close(), which stops whatever `local` started
            self.local = LocalPredictor(
                speedup, self.options.prediction_servers, encoder=self.options.multimodal
            )
            self.local.start()
            training_url, urls = self.local.training_url, self.local.prediction_urls
        self.client = PredictorClient(urls, training_url, config=client_config(speedup))

    async def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        assert self.client is not None, "start() first"
        rows = [pod.row(self.with_class) for pod in pods]
        predictions = await self._ask(rows)
        if predictions:
            self.guard.seen(predictions[0].model_version, now_s)
            if self.guard.due(now_s, self.completed):
                fresh = await self.guard.hold(lambda: self._ask(rows), now_s)
                predictions = fresh or predictions
        else:
            self.fallbacks += 1
        slos = (request.slo_ttft_ms, request.slo_tpot_ms) if self.use_slos else (None, None)
        profile = request.profile
        chosen = self.decide(
            PickerRequest(
                request.input_tokens, *slos, encoder_input_size=request.encoder_input_size
            ),
            [self._state(profile, index, pod) for index, pod in enumerate(pods)],
            predictions,
            profile,
        )
        self.rules[f"{profile}:{chosen.rule}" if profile else chosen.rule] += 1
        pod_class = pods[chosen.index].pod_class
        self.pending[request.id, profile] = (chosen.prediction, chosen.index, pod_class)
        tpot_slo = slos[1]
        if tpot_slo is not None and profile != PREFILL:  # a prefill pod streams no tokens
            self.tpot_slos.setdefault((profile, chosen.index), Counter())[tpot_slo] += 1
        if chosen.prediction is not None:
            self.scores.routed(chosen.prediction.model_version, now_s)
        return chosen.index

    def decide(
        self,
        request: PickerRequest,
        pods: list[PodState],
        predictions: list[Prediction] | None,
        profile: str,
    ) -> Pick:
        """The pick among `pods`; `profile` is llm-d's ("" on a monolithic pool)."""
        raise NotImplementedError

    async def _ask(self, rows: list[dict[str, float | int | str]]) -> list[Prediction] | None:
        assert self.client is not None, "start() first"
        try:
            return await self.client.predict(rows)
        except PredictionUnavailable as exc:
            self.timeouts += isinstance(exc, PredictionTimeout)
            return None

    def _state(self, profile: str, index: int, pod: PodFeatures) -> PodState:
        slos = self.tpot_slos.get((profile, index))
        return PodState(
            str(index),
            kv_cache_percentage=pod.kv_cache_percentage,
            num_request_waiting=pod.num_request_waiting,
            running_requests=pod.num_request_running,
            prefill_tokens_in_flight=pod.prefill_tokens_in_flight,
            prefix_cache_score=pod.prefix_cache_score,
            encoder_matched_size=pod.encoder_matched_size,
            running_tpot_slos_ms=(min(slos),) if slos else (),  # only the tightest counts
            pod_class=pod.pod_class if self.with_class else "",
            pod_type=pod.pod_type,
        )

    def observe(self, observation: Observation) -> None:
        done = observation.completion
        role = observation.features.pod_type  # the profile that picked this pod
        if role != PREFILL:  # a split request counts once, at its decode pod
            self.completed += 1
        acted, pod, pod_class = self.pending.pop((done.request.id, role))
        slo = done.request.slo_tpot_ms if self.use_slos else None
        slos = self.tpot_slos.get((role, pod))
        if slo is not None and slos is not None:
            slos[slo] -= 1
            if slos[slo] <= 0:
                del slos[slo]
        predicted = {}
        if acted is not None:
            predicted = {"predicted_ttft_ms": acted.ttft_ms, "predicted_tpot_ms": acted.tpot_ms}
            # what this pod's prediction is of (poolsim.policy_api.Observation.training_rows)
            split = done.prefill_pod is not None
            ttft = None if split and role == DECODE else done.ttft_ms
            tpot = None if role == PREFILL else done.tpot_ms
            self.scores.completed(acted.model_version, (acted.ttft_ms, acted.tpot_ms), ttft, tpot)
            if role:
                self.roles.add(role, acted, ttft, tpot)
            if ttft is not None and pod_class:
                score = self.class_ttft.setdefault(pod_class, TargetScore())
                score.add(ttft, acted.ttft_ms)
        assert self.client is not None
        if self.options.training_url is not None or self.local is not None:
            for row in observation.training_rows(self.with_class):
                self.client.record({**row, **predicted})

    async def close(self) -> None:
        try:
            if self.client is not None:
                await self.client.aclose()  # sends what is buffered
                self.client_stats = self.client.stats()
            if self.local is not None and self.local.servers:
                self.stored_at_end = await asyncio.to_thread(stored_rows, self.local.training_url)
        finally:
            if self.local is not None:
                self.local.stop()

    def summary(self) -> dict[str, float]:
        out = self.scores.figures()
        out.update(self.roles.figures())
        out.update(self.guard.figures())
        for pod_class, score in sorted(self.class_ttft.items()):
            out[f"served_ttft_rows@{pod_class}"] = float(score.rows)
            if score.rows:
                out[f"served_ttft_coverage@{pod_class}"] = score.covered / score.rows
        out["fallbacks"] = float(self.fallbacks)
        out["timeouts"] = float(self.timeouts)
        out.update({f"rule_{rule}": float(count) for rule, count in sorted(self.rules.items())})
        stats = self.client_stats
        if stats is not None:
            out["feedback_sent"] = float(stats.counters.feedback_sent)
            out["feedback_dropped"] = float(stats.counters.feedback_dropped)
            predict_ms = stats.latency_ms.get("predict", {})
            if "p50" in predict_ms:
                out["predict_call_p50_ms"] = predict_ms["p50"]
        if self.stored_at_end is not None:
            out["trainer_samples"] = float(self.stored_at_end)
        return out


class PredictedLatencyPolicy(PredictorPolicy):
    """llm-d's picker, unchanged; `config` and `use_slos` are llm-d's knobs for a sweep
    (poolsim.picker_knobs parses them from the policy's name)."""

    name = "predicted-latency"

    def __init__(
        self,
        options: PolicyOptions,
        config: PickerConfig | None = None,
        use_slos: bool = True,
        name: str = "predicted-latency",
        *,
        pod_class: bool = True,
    ) -> None:
        super().__init__(options)
        self.config = config or PickerConfig()
        self.use_slos = use_slos
        self.name = name
        self.sends_pod_class = pod_class

    def decide(
        self,
        request: PickerRequest,
        pods: list[PodState],
        predictions: list[Prediction] | None,
        profile: str,
    ) -> Pick:
        # llm-d's picker as it is, in each profile; admission off: nothing is sheddable
        # in the simulator, every request is served
        return pick(request, pods, predictions, self.rng, self.config, admission=False)


def stored_rows(training_url: str) -> int | None:
    """Rows in the trainer's store (training + held-out), or None if it does not answer."""
    try:
        status = httpx.get(f"{training_url}/data/status", timeout=10.0).json()
        return int(status["training_data"]["total_samples"] + status["test_data"]["total_samples"])
    except (httpx.HTTPError, KeyError, TypeError, ValueError):
        return None
