"""Value types shared by the client and the picker: a prediction, a pod and a request."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

# One /predict/bulk/strict row or one training entry, as the wire contract spells it
# (docs/api.md section 2). Any mapping works; it is sent as a JSON object.
Row = Mapping[str, object]


class Prediction(NamedTuple):
    """The server's p90 (or mean) TTFT and TPOT for one row, and the model that answered."""

    ttft_ms: float
    tpot_ms: float
    model_version: str
    # Split nodes of the model that answered each target; 0: a constant, which cannot tell
    # pods apart by their features. None: the server did not say (llm-d's does not).
    ttft_model_splits: int | None = None
    tpot_model_splits: int | None = None


@dataclass(frozen=True, slots=True)
class PodState:
    """What the picker knows about one candidate pod when a request arrives.

    `running_requests` and `prefill_tokens_in_flight` are the picker's own counts of what it
    has sent there and not seen finish (llm-d sends them as num_request_running and
    prefill_tokens_in_flight); `kv_cache_percentage` and `num_request_waiting` are scraped
    from the pod; `running_tpot_slos_ms` are the TPOT SLOs of the requests running there,
    which lower the TPOT budget a new request gets on that pod. `pod_class` is the pod's
    hardware class ("h200", "b200"; ours, not llm-d's): sent in its prediction and training
    rows when set, and left out of them when "" (the rows llm-d's EPP sends)."""

    name: str
    kv_cache_percentage: float = 0.0
    num_request_waiting: int = 0
    running_requests: int = 0
    prefill_tokens_in_flight: int = 0
    prefix_cache_score: float = 0.0
    pod_type: str = ""
    encoder_matched_size: int = 0
    running_tpot_slos_ms: tuple[float, ...] = ()
    pod_class: str = ""


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """The request being scheduled. An SLO of None means its header was absent (counts as 0
    in headroom); a negative priority marks it sheddable (see picker.admit)."""

    input_token_length: int
    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    streaming: bool = True
    priority: int = 0
    encoder_input_size: int = 0

    @property
    def has_slo(self) -> bool:
        return self.ttft_slo_ms is not None or self.tpot_slo_ms is not None
