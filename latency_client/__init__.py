"""latency_client: a Python client for the latency predictor (coalescing, failover, training
rows back) and llm-d's predicted-latency picker as pure functions.

Runtime dependencies: httpx and orjson only; it never imports the servers.
"""

from __future__ import annotations

from latency_client.client import PredictorClient
from latency_client.config import ClientConfig
from latency_client.errors import (
    ClientClosed,
    LatencyClientError,
    PredictionRejected,
    PredictionTimeout,
    PredictionUnavailable,
)
from latency_client.picker import Pick, PickerConfig, pick
from latency_client.routing import choose_pod, completion_rows
from latency_client.stats import ClientStats
from latency_client.sync import SyncPredictorClient
from latency_client.types import PodState, Prediction, RequestInfo, Row

__all__ = [
    "ClientClosed",
    "ClientConfig",
    "ClientStats",
    "LatencyClientError",
    "Pick",
    "PickerConfig",
    "PodState",
    "Prediction",
    "PredictionRejected",
    "PredictionTimeout",
    "PredictionUnavailable",
    "PredictorClient",
    "RequestInfo",
    "Row",
    "SyncPredictorClient",
    "choose_pod",
    "completion_rows",
    "pick",
]
