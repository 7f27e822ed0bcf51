"""The interface between the simulator and a routing policy.

Per request the engine calls `choose(request, pods, now_s)` with one `PodFeatures` per pod:
exactly the prediction row llm-d's endpoint picker sends for that pod (spec/picker.md 1),
and takes the returned pod index. The call may return an awaitable (a policy that asks a
prediction server over HTTP); the engine awaits it, with simulated time paused. After each
request completes, `observe(completion)` gets its actual TTFT/TPOT with the features it was
routed on, from which the training rows the EPP sends back are built (`training_rows`).
`paced` policies run at the command's `--speedup` (simulated seconds per wall second; the
predictor's retrain interval is to be scaled by it); the others as fast as the CPU allows.
`start`/`close` bracket a run (servers, HTTP clients); `summary` adds figures of the
policy's own (e.g. coverage of served p90s) to the report. Only the oracle reads the
simulator's internals, through `attach`.

`attach` gets every pod of the run in index order, those that join the pool later
included (poolsim.pool_changes); `choose` gets the features of the pods live at that
instant, which are always the first `len(pods)` of them (pods join in index order), so an
index means the same pod to a policy for the whole run.

In a prefill/decode pool (poolsim.roles) the engine asks twice, as llm-d's picker runs
its profiles: first with `RequestInfo.profile` "decode" and the features of the live
decode pods only, then, when the decider splits the request, with "prefill" and the live
prefill pods' features; an index is then one into the list it was given (the engine maps
it back to the pod). A monolithic pool asks once, with profile "", every pod's features.
Each row carries its pod's role as `pod_type`; a split request is observed twice, with
its prefill pod's features (a TTFT row) and its decode pod's (a TPOT row).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

from poolsim.request import Completion, Request

if TYPE_CHECKING:
    from poolsim.pod import Pod


@dataclass(frozen=True, slots=True)
class PodFeatures:
    """One pod's prediction row, as the EPP builds it when this request is scheduled."""

    kv_cache_percentage: float  # the pod's KV-cache usage, 0..1
    input_token_length: int  # this request's prompt
    num_request_waiting: int  # the pod's queue
    num_request_running: int  # the picker's requests in flight to the pod (queued included)
    num_tokens_generated: int  # 1 at prediction time
    prefill_tokens_in_flight: int  # prompt tokens of in-flight requests without a first token
    decode_tokens_in_flight: int  # 0 at prediction time
    prefix_cache_score: float  # matched prefix blocks / prompt blocks on this pod
    # not a prediction feature: uncached prompt tokens the EPP dispatched here that have no
    # first token yet (its own count, read by token-load; never sent to a predictor)
    uncached_tokens_in_flight: int = 0
    # the pod's hardware class (poolsim.hardware): sent only by policies that send classes
    pod_class: str = ""
    # llm-d's encoder features: this request's vision tokens, and how many of them this
    # pod's encoder cache holds (poolsim.encoder); 0 and 0 for a text-only request
    encoder_input_size: int = 0
    encoder_matched_size: int = 0
    # the pod's P/D role (poolsim.roles): "prefill", "decode", or "" for a monolithic pod
    pod_type: str = ""

    def row(self, pod_class: bool = False) -> dict[str, float | int | str]:
        """The JSON row for /predict/bulk/strict, with the pod's role as `pod_type` and
        the encoder sizes as llm-d's EPP sends them (0 without images, the servers'
        default); with `pod_class`, our `pod_class` field too (when the pod has one)."""
        fields = asdict(self)
        del fields["uncached_tokens_in_flight"]
        del fields["pod_class"]
        del fields["pod_type"]
        row: dict[str, float | int | str] = {**fields, "pod_type": self.pod_type}
        if pod_class and self.pod_class:
            row["pod_class"] = self.pod_class
        return row


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a picker knows of a request: no output length, no prefix group (it sees the
    prompt, which shows through each pod's prefix_cache_score)."""

    id: int
    arrival_s: float
    input_tokens: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    encoder_input_size: int = 0  # its images' vision tokens (0: text only)
    # which of llm-d's profiles asks: "" (a monolithic pool), "decode" or "prefill"
    profile: str = ""


@dataclass(frozen=True, slots=True)
class Observation:
    """A completed request, with the features of the pod it was routed to at dispatch."""

    completion: Completion
    features: PodFeatures

    def training_rows(self, pod_class: bool = False) -> list[dict[str, float | int | str]]:
        """The rows the EPP sends back (spec/picker.md 7): one measuring TTFT, and one
        measuring TPOT when more than one token was generated (`pod_class`: as row()).
        For a split request (P/D) as llm-d's predicted-latency plugin does: its prefill
        pod gives the TTFT row only, its decode pod the TPOT row only; a decode pod that
        served the whole request gives both."""
        done = self.completion
        base = self.features.row(pod_class)
        role = self.features.pod_type
        split = done.prefill_pod is not None
        rows: list[dict[str, float | int | str]] = []
        if not (split and role == "decode"):
            rows.append({**base, "actual_ttft_ms": done.ttft_ms, "actual_tpot_ms": 0.0})
        if done.tpot_ms is not None and role != "prefill":
            rows.append(
                {
                    **base,
                    "num_tokens_generated": done.request.output_tokens,
                    "actual_ttft_ms": 0.0,
                    "actual_tpot_ms": done.tpot_ms,
                }
            )
        return rows


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """What the command hands a policy factory (poolsim.policies.FACTORIES). A policy with
    a real predictor adds its settings here (e.g. the servers' URLs) and reads `speedup`
    to scale the predictor's retrain interval."""

    seed: int
    speedup: float = 10.0
    # predicted-latency: a predictor at these URLs, or (none given) our servers started for
    # the run, `prediction_servers` of them besides the trainer
    training_url: str | None = None
    prediction_urls: tuple[str, ...] = ()
    prediction_servers: int = 1
    max_model_age_s: float = 12.0  # hold simulated time for a newer model (0: never)
    # the workload's requests carry images: our servers run with the encoder features on,
    # token-load-per-class takes llm-d's multimodal affinity settings (poolsim.token_load)
    multimodal: bool = False
    # a P/D pool's decider threshold (poolsim.roles): latency-first's decode profile
    # judges each decode pod by whether the decider would split the request there
    pd_threshold: int = 16


class Policy(Protocol):
    name: str
    paced: bool  # True: needs simulated time paced against wall time (a real predictor)

    def attach(self, pods: Sequence[Pod], requests: Mapping[int, Request]) -> None: ...
    async def start(self, speedup: float | None) -> None: ...
    def choose(
        self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float
    ) -> int | Awaitable[int]: ...
    def observe(self, observation: Observation) -> Awaitable[None] | None: ...
    async def close(self) -> None: ...
    def summary(self) -> dict[str, float]: ...


class BasePolicy:
    """No-op lifecycle; subclasses implement `choose`."""

    name = "base"
    paced = False

    def attach(self, pods: Sequence[Pod], requests: Mapping[int, Request]) -> None:
        return None

    async def start(self, speedup: float | None) -> None:
        return None

    def observe(self, observation: Observation) -> Awaitable[None] | None:
        return None

    async def close(self) -> None:
        return None

    def summary(self) -> dict[str, float]:
        return {}
