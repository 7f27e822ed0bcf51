"""Metrics of the predict routes, shared by both servers (prometheus-client)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

# Sub-millisecond resolution: a 100-row strict call should take a few hundred microseconds.
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.005,
    0.0075,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)


class PredictMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.seconds = Histogram(
            "latency_predict_duration_seconds",
            "Server-side time of one predict call, decode to encoded response",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.rows = Counter(
            "latency_predicted_rows", "Rows predicted", ["route"], registry=registry
        )
        self.errors = Counter(
            "latency_predict_errors",
            "Predict calls or rows refused",
            ["route", "reason"],
            registry=registry,
        )

        # Each route's two children, looked up once: labels() costs ~3 us a call on the
        # hot path, the observation itself ~3 (benchmarks/bench_predict.py prints both).
        self._children: dict[str, tuple[Any, Any]] = {}

    def observe(self, route: str, seconds: float, rows: int) -> None:
        children = self._children.get(route)
        if children is None:
            children = self._children[route] = (self.seconds.labels(route), self.rows.labels(route))
        children[0].observe(seconds)
        children[1].inc(rows)
