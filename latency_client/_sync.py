"""SyncPredictorClient: the asyncio client for threaded callers (WSGI routers, thread pools).

It runs a PredictorClient on an event loop in its own daemon thread; every method may be
called from any thread, and concurrent callers are merged exactly as on asyncio.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Coroutine, Sequence
from types import TracebackType
from typing import TypeVar

from latency_client._client import PredictorClient
from latency_client._config import ClientConfig
from latency_client._errors import ClientClosed
from latency_client._stats import ClientStats
from latency_client._types import Prediction, Row

T = TypeVar("T")
GRACE_S = 1.0  # beyond a call's own deadline, how long a thread waits for the loop


class SyncPredictorClient:
    def __init__(
        self,
        prediction_urls: str | Sequence[str],
        training_url: str | None = None,
        *,
        token: str | None = None,
        config: ClientConfig | None = None,
        verify: ssl.SSLContext | str | bool = True,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="latency-client", daemon=True
        )
        self._thread.start()

        async def make() -> PredictorClient:  # built on its loop: its futures live there
            return PredictorClient(
                prediction_urls, training_url, token=token, config=config, verify=verify
            )

        self._client = self._run(make(), timeout=10.0)

    def _run(self, coroutine: Coroutine[object, object, T], timeout: float) -> T:
        if self._loop.is_closed():
            coroutine.close()
            raise ClientClosed("the client is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def predict(self, rows: Sequence[Row], *, deadline_s: float | None = None) -> list[Prediction]:
        """As PredictorClient.predict; blocks the calling thread until the answer."""
        budget = self._client.config.deadline_s if deadline_s is None else deadline_s
        return self._run(self._client.predict(list(rows), deadline_s=budget), budget + GRACE_S)

    def record(self, entry: Row) -> None:
        """Queue one training row; returns at once."""
        if self._loop.is_closed():
            raise ClientClosed("the client is closed")
        self._loop.call_soon_threadsafe(self._client.record, dict(entry))

    def flush(self) -> bool:
        return self._run(self._client.flush(), self._client.config.flush_timeout_s + GRACE_S)

    def stats(self) -> ClientStats:
        async def snapshot() -> ClientStats:  # read on the loop that mutates it
            return self._client.stats()

        return self._run(snapshot(), 10.0)

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        config = self._client.config
        self._run(self._client.aclose(), config.close_drain_timeout_s + 10.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        self._loop.close()

    def __enter__(self) -> SyncPredictorClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
