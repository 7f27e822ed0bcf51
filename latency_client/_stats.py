"""Counters and latency percentiles of one PredictorClient (read with client.stats())."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields

KEEP_LATENCIES = 10_000  # the newest samples per series; percentiles are over these


def percentiles(values: list[float]) -> dict[str, float]:
    """Nearest-rank p50/p90/p99 and the maximum; empty input gives an empty dict."""
    if not values:
        return {}
    ordered = sorted(values)
    last = len(ordered) - 1

    def rank(q: float) -> float:
        return ordered[min(last, int(q * len(ordered)))]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": ordered[last]}


@dataclass
class Counters:
    """Totals since the client started (or since reset_stats)."""

    calls: int = 0  # /predict/bulk/strict calls answered 200
    rows: int = 0  # rows in those calls
    callers: int = 0  # predict() calls answered
    merged_callers: int = 0  # callers whose rows rode in an answered call (parts, summed)
    failed_attempts: int = 0  # HTTP attempts that failed: transport error, timeout, not 200
    retries: int = 0  # second attempts after a failed first one
    failovers: int = 0  # calls answered by another replica after the first one failed
    unavailable: int = 0  # predict() calls that raised PredictionUnavailable (any kind)
    timeouts: int = 0  # of those, deadline passed
    rejected_callers: int = 0  # of those, a 422 named their rows
    feedback_recorded: int = 0  # record() calls
    feedback_sent: int = 0  # rows the trainer accepted (202)
    feedback_rejected: int = 0  # rows the trainer refused as invalid (never retried)
    feedback_dropped: int = 0  # rows dropped: buffer full, or still buffered at aclose()
    feedback_flushes: int = 0  # /add_training_data_bulk calls answered 202
    feedback_failed_flushes: int = 0  # calls that failed and will be retried


@dataclass(frozen=True)
class ClientStats:
    """A snapshot: counters, derived ratios and latency percentiles in milliseconds.

    `latency_ms` series: `predict` (a caller's wall time in predict()), `added` (that minus
    the HTTP exchange that answered it: what the client itself adds, i.e. waiting for the
    coalescing window or a free call slot, failed attempts, fan-out), `http` (one exchange:
    encode, POST, decode), `server` (the server's own processing_time_ms)."""

    counters: Counters
    merged_callers_per_call: float
    feedback_buffered: int
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            f.name: getattr(self.counters, f.name) for f in fields(self.counters)
        }
        out["merged_callers_per_call"] = self.merged_callers_per_call
        out["feedback_buffered"] = self.feedback_buffered
        out["latency_ms"] = self.latency_ms
        return out


class Stats:
    """Mutated from the event loop thread only (the synchronous wrapper reads it there)."""

    SERIES = ("predict", "added", "http", "server")

    def __init__(self) -> None:
        self.counters = Counters()
        self._latencies = {name: deque[float](maxlen=KEEP_LATENCIES) for name in self.SERIES}

    def observe(self, series: str, ms: float) -> None:
        self._latencies[series].append(ms)

    def reset(self) -> None:
        self.counters = Counters()
        for values in self._latencies.values():
            values.clear()

    def snapshot(self, feedback_buffered: int) -> ClientStats:
        c = self.counters
        return ClientStats(
            counters=Counters(**{f.name: getattr(c, f.name) for f in fields(c)}),
            merged_callers_per_call=c.merged_callers / c.calls if c.calls else 0.0,
            feedback_buffered=feedback_buffered,
            latency_ms={name: percentiles(list(v)) for name, v in self._latencies.items()},
        )
