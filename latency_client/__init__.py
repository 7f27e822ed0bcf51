"""latency_client: what a router written in Python needs from the latency predictor.

- Predictions: `PredictorClient` (asyncio: coalescing, failover, training rows sent back)
  or `SyncPredictorClient` (threads), tuned by `ClientConfig`, watched by `ClientStats`
  (nearest-rank `percentiles`); every missing prediction is a `PredictionUnavailable`.
- Picking: `pick` (llm-d's predicted-latency picker as pure functions) or
  `LatencyFirstPicker` (ours), on `PodState`, `RequestInfo` and `Prediction`;
  `choose_pod` and `completion_rows` wire a client and `pick` into a router.
- Prefill/decode pools: `choose_pd` runs llm-d's decode profile, decider and prefill
  profile with either picker (`PdLatencyFirstPicker` for ours), `pd_completion_rows`
  builds the training rows as llm-d's plugin sends them (`PdPick`, `pd_splits`).
- `Http11Connections`: the hot path's HTTP/1.1 transport, for benchmarks that measure it.

Import from here only: the underscored modules are private. Runtime dependencies: httpx and
orjson; it never imports the servers.
"""

from __future__ import annotations

from latency_client._client import PredictorClient
from latency_client._config import ClientConfig
from latency_client._errors import (
    ClientClosed,
    LatencyClientError,
    PredictionRejected,
    PredictionTimeout,
    PredictionUnavailable,
)
from latency_client._headroom import prediction_row, prediction_rows
from latency_client._http11 import Http11Connections, HttpError
from latency_client._latency_first import LatencyFirstConfig, LatencyFirstPicker
from latency_client._latency_first_pd import PdLatencyFirstConfig, PdLatencyFirstPicker
from latency_client._pd import (
    DEFAULT_PD_THRESHOLD,
    PdPick,
    ProfilePicker,
    choose_pd,
    pd_completion_rows,
    pd_splits,
    uncached_prompt_tokens,
)
from latency_client._picker import Pick, PickerConfig, pick
from latency_client._routing import choose_pod, completion_rows
from latency_client._stats import ClientStats, percentiles
from latency_client._sync import SyncPredictorClient
from latency_client._types import PodState, Prediction, RequestInfo, Row

__all__ = [
    "DEFAULT_PD_THRESHOLD",
    "ClientClosed",
    "ClientConfig",
    "ClientStats",
    "Http11Connections",
    "HttpError",
    "LatencyClientError",
    "LatencyFirstConfig",
    "LatencyFirstPicker",
    "PdLatencyFirstConfig",
    "PdLatencyFirstPicker",
    "PdPick",
    "Pick",
    "PickerConfig",
    "PodState",
    "Prediction",
    "PredictionRejected",
    "PredictionTimeout",
    "PredictionUnavailable",
    "PredictorClient",
    "ProfilePicker",
    "RequestInfo",
    "Row",
    "SyncPredictorClient",
    "choose_pd",
    "choose_pod",
    "completion_rows",
    "pd_completion_rows",
    "pd_splits",
    "percentiles",
    "pick",
    "prediction_row",
    "prediction_rows",
    "uncached_prompt_tokens",
]
