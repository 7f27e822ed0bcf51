"""PredictorClient settings; the defaults are the llm-d EPP's (docs/picker.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientConfig:
    # Coalescing (_coalescer.py explains the rule)
    window_s: float = 0.001  # a batch closes this long after its first caller
    max_rows_per_caller: int = 100  # a caller's rows beyond this travel as several parts
    max_rows_per_call: int = 1000  # rows merged into one /predict/bulk/strict call at most
    max_in_flight: int = 36  # prediction calls running at once
    min_expected_merge: float = 1.0  # wait the window only if this many callers may join
    # Deadline and failover
    deadline_s: float = 0.4  # a caller's budget end to end (the EPP's)
    attempt_timeout_s: float = 0.2  # one attempt at most: leaves time to try another replica
    backoff_s: float = 1.0  # a failed replica is skipped this long, doubling per failure
    max_backoff_s: float = 30.0
    # Training rows
    flush_interval_s: float = 1.0
    max_buffered_rows: int = 100_000  # beyond this the oldest rows are dropped (counted)
    max_rows_per_flush: int = 10_000  # the trainer's default LATENCY_MAX_ROWS_PER_CALL
    max_flush_backoff_s: float = 4.0  # retry delay after failed flushes: 2 s, 4 s, 4 s ...
    flush_timeout_s: float = 10.0
    close_drain_timeout_s: float = 2.0  # aclose() tries this long to send what is buffered

    def __post_init__(self) -> None:
        if not 1 <= self.max_rows_per_caller <= self.max_rows_per_call:
            raise ValueError("need 1 <= max_rows_per_caller <= max_rows_per_call")
        if self.max_in_flight < 1 or self.max_buffered_rows < 1 or self.max_rows_per_flush < 1:
            raise ValueError("max_in_flight, max_buffered_rows and max_rows_per_flush must be >= 1")
        if self.window_s < 0 or self.deadline_s <= 0 or self.attempt_timeout_s <= 0:
            raise ValueError("window_s must be >= 0, deadline_s and attempt_timeout_s > 0")
