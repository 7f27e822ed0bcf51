"""PredictorClient: what a Python router needs from the latency predictor, on asyncio.

client = PredictorClient(["http://127.0.0.1:8001", "http://127.0.0.1:8002"],
                         "http://127.0.0.1:8000")
predictions = await client.predict(rows)  # one Prediction per row, in order
client.record(training_row)               # sent back within a second
await client.aclose()
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Sequence
from types import TracebackType

import httpx

from latency_client._coalescer import Coalescer, Result
from latency_client._config import ClientConfig
from latency_client._errors import (
    ClientClosed,
    PredictionRejected,
    PredictionTimeout,
    PredictionUnavailable,
)
from latency_client._feedback import Feedback
from latency_client._http11 import Http11Connections, ssl_context
from latency_client._replicas import ReplicaSet
from latency_client._stats import ClientStats, Stats
from latency_client._strict import StrictCaller
from latency_client._types import Prediction, Row


def _urls(value: str | Sequence[str]) -> list[str]:
    """A list, or one comma-separated string as in PREDICTION_SERVER_URL."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return [u.strip() for u in items if u.strip()]


class PredictorClient:
    def __init__(
        self,
        prediction_urls: str | Sequence[str],
        training_url: str | None = None,
        *,
        token: str | None = None,
        config: ClientConfig | None = None,
        verify: ssl.SSLContext | str | bool = True,
    ) -> None:
        """`token`: sent as `Authorization: Bearer <token>` (servers that set
        LATENCY_PROTECT_EPP_ROUTES need it). `verify`: CA bundle or context for https."""
        self.config = config = config or ClientConfig()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._stats = Stats()
        self.replicas = ReplicaSet(
            _urls(prediction_urls), backoff_s=config.backoff_s, max_backoff_s=config.max_backoff_s
        )
        context = ssl_context(verify)
        self._http = Http11Connections(context)  # the hot path (_http11.py says why)
        caller = StrictCaller(
            self._http, self.replicas, self._stats, config.attempt_timeout_s, headers
        )
        self._coalescer = Coalescer(
            caller.call,
            self._stats,
            window_s=config.window_s,
            max_rows_per_call=config.max_rows_per_call,
            max_in_flight=config.max_in_flight,
            min_expected_merge=config.min_expected_merge,
        )
        self._feedback = None
        if training_url is not None:  # one call a second: the well-kept client is cheap here
            http = httpx.AsyncClient(verify=context, limits=httpx.Limits(max_connections=2))
            self._feedback = Feedback(
                http,
                training_url,
                headers,
                self._stats,
                flush_interval_s=config.flush_interval_s,
                max_buffered=config.max_buffered_rows,
                max_rows_per_flush=config.max_rows_per_flush,
                max_backoff_s=config.max_flush_backoff_s,
                timeout_s=config.flush_timeout_s,
            )
        self._closed = False

    @classmethod
    def from_env(cls, config: ClientConfig | None = None) -> PredictorClient:
        """The EPP's variables: PREDICTION_SERVER_URL (comma-separated), TRAINING_SERVER_URL,
        and our LATENCY_API_TOKEN for servers that protect the EPP's routes."""
        return cls(
            os.environ["PREDICTION_SERVER_URL"],
            os.environ.get("TRAINING_SERVER_URL"),
            token=os.environ.get("LATENCY_API_TOKEN"),
            config=config,
        )

    async def predict(
        self, rows: Sequence[Row], *, deadline_s: float | None = None
    ) -> list[Prediction]:
        """One Prediction per row, in order, or PredictionUnavailable (PredictionTimeout past
        the deadline, PredictionRejected for invalid rows) for the caller to fall back on."""
        if self._closed:
            raise ClientClosed("the client is closed")
        if not rows:
            return []
        started = time.perf_counter()
        budget = self.config.deadline_s if deadline_s is None else deadline_s
        deadline = asyncio.get_running_loop().time() + budget
        try:
            predictions, exchange_s = await self._submit(rows, deadline)
        except PredictionUnavailable as exc:
            self._count_unavailable(exc)
            raise
        wall_ms = (time.perf_counter() - started) * 1000.0
        self._stats.counters.callers += 1
        self._stats.observe("predict", wall_ms)
        self._stats.observe("added", wall_ms - exchange_s * 1000.0)
        return predictions

    async def _submit(self, rows: Sequence[Row], deadline: float) -> Result:
        size = self.config.max_rows_per_caller
        if len(rows) <= size:
            return await self._coalescer.submit(rows, deadline)
        parts = await asyncio.gather(
            *(
                self._coalescer.submit(rows[i : i + size], deadline)
                for i in range(0, len(rows), size)
            ),
            return_exceptions=True,
        )
        for part in parts:
            if isinstance(part, BaseException):
                raise part
        answered = [part for part in parts if not isinstance(part, BaseException)]
        return [p for part in answered for p in part[0]], max(part[1] for part in answered)

    def _count_unavailable(self, exc: PredictionUnavailable) -> None:
        counters = self._stats.counters
        counters.unavailable += 1
        counters.timeouts += isinstance(exc, PredictionTimeout)
        counters.rejected_callers += isinstance(exc, PredictionRejected)

    def record(self, entry: Row) -> None:
        """Queue one training row (fields of api.md's training entry, with `actual_*` and,
        ideally, the `predicted_*` the pick acted on). Call it from the event loop's thread."""
        if self._feedback is None:
            raise ValueError("no training_url was given")
        if self._closed:
            raise ClientClosed("the client is closed")
        self._feedback.record(entry)

    async def flush(self) -> bool:
        """Send buffered training rows now; False when the trainer did not take them."""
        return True if self._feedback is None else await self._feedback.flush()

    def stats(self) -> ClientStats:
        return self._stats.snapshot(0 if self._feedback is None else self._feedback.buffered)

    def reset_stats(self) -> None:
        self._stats.reset()

    async def aclose(self) -> None:
        """Fail waiting callers with ClientClosed, try once more to send buffered rows (what
        cannot be sent is counted as dropped), close the connections."""
        if self._closed:
            return
        self._closed = True
        await self._coalescer.aclose()
        if self._feedback is not None:
            await self._feedback.aclose(self.config.close_drain_timeout_s)
        await self._http.aclose()

    async def __aenter__(self) -> PredictorClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
