"""Training rows back to the trainer: buffered, sent every second in one
/add_training_data_bulk call, retried with back-off while the trainer is away.

Nothing is dropped silently. The buffer holds at most `max_buffered` rows (besides the
chunk in flight); past that the oldest rows go first (the newest say most about the pods'
present) and are counted in `feedback_dropped`, as are rows still buffered when the client
closes. Rows the trainer refuses as invalid (422, or listed as rejected in a 202) are
counted in `feedback_rejected` and never sent again. Delivery is at least once: a call
that timed out after the trainer stored it is sent again.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque

import httpx
import orjson

from latency_client._stats import Stats
from latency_client._strict import encode_rows
from latency_client._types import Row

ROUTE = "/add_training_data_bulk"
# Statuses worth another try: the trainer is busy (429), unavailable (503) or restarting.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def _too_many_rows(body: bytes) -> bool:
    """A 422 about the size of the call itself (loc ["body", "entries"]), not about a row."""
    try:
        detail = orjson.loads(body).get("detail")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return isinstance(detail, list) and any(
        isinstance(e, dict) and e.get("loc") == ["body", "entries"] for e in detail
    )


class Feedback:
    def __init__(
        self,
        http: httpx.AsyncClient,
        training_url: str,
        headers: dict[str, str],
        stats: Stats,
        *,
        flush_interval_s: float,
        max_buffered: int,
        max_rows_per_flush: int,
        max_backoff_s: float,
        timeout_s: float,
    ) -> None:
        self._http, self._url = http, training_url.rstrip("/") + ROUTE
        self._headers = {"Content-Type": "application/json", **headers}
        self._stats = stats
        self._interval, self._max_backoff = flush_interval_s, max_backoff_s
        self._max_buffered, self._chunk, self._timeout = max_buffered, max_rows_per_flush, timeout_s
        self._buffer: deque[Row] = deque()
        self._task: asyncio.Task[None] | None = None
        self._jitter = random.Random()
        self._flushing = asyncio.Lock()  # the loop's flush and a caller's never interleave

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def record(self, entry: Row) -> None:
        """Buffer one row (call from the client's event loop thread)."""
        self._stats.counters.feedback_recorded += 1
        self._buffer.append(dict(entry))  # a copy: the caller may reuse its dict
        self._drop_oldest()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _drop_oldest(self) -> None:
        excess = len(self._buffer) - self._max_buffered
        for _ in range(max(0, excess)):
            self._buffer.popleft()
        self._stats.counters.feedback_dropped += max(0, excess)

    async def _run(self) -> None:
        delay = self._interval
        while True:
            await asyncio.sleep(delay)
            if await self.flush():
                delay = self._interval
            else:  # back off: 2, 4, ... up to the cap, with 20 % jitter
                delay = min(self._max_backoff, delay * 2) * self._jitter.uniform(0.8, 1.0)

    async def flush(self) -> bool:
        """Send everything buffered now (chunks of max_rows_per_flush); False when a call
        failed and its rows went back to the head of the buffer for a later try."""
        async with self._flushing:
            return await self._flush_chunks()

    async def _flush_chunks(self) -> bool:
        while self._buffer:
            chunk = [self._buffer.popleft() for _ in range(min(self._chunk, len(self._buffer)))]
            try:
                sent = await self._send(chunk)
            except BaseException:  # cancelled mid-call (aclose): keep the rows to count them
                self._buffer.extendleft(reversed(chunk))
                raise
            if not sent:
                self._buffer.extendleft(reversed(chunk))
                self._drop_oldest()
                return False
        return True

    async def _send(self, chunk: list[Row]) -> bool:
        """True when the chunk is settled: accepted, or refused as invalid (counted)."""
        counters = self._stats.counters
        try:
            reply = await self._http.post(
                self._url,
                content=encode_rows(chunk, key="entries"),
                headers=self._headers,
                timeout=self._timeout,
            )
        except httpx.HTTPError:
            counters.feedback_failed_flushes += 1
            return False
        if reply.status_code == 202:
            rejected = self._rejected_count(reply.content)
            counters.feedback_flushes += 1
            counters.feedback_sent += len(chunk) - rejected
            counters.feedback_rejected += rejected
            return True
        if reply.status_code == 422 and _too_many_rows(reply.content) and self._chunk > 1:
            self._chunk = max(1, self._chunk // 2)  # the trainer's limit is lower: halve
            return False
        if reply.status_code in RETRY_STATUSES or reply.status_code in (401, 403):
            counters.feedback_failed_flushes += 1
            return False
        counters.feedback_rejected += len(chunk)  # 422 (no valid row), 400, 413, ...
        return True

    @staticmethod
    def _rejected_count(body: bytes) -> int:
        try:
            return int(orjson.loads(body).get("rejected", 0))
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            return 0

    async def aclose(self, drain_timeout_s: float) -> None:
        """Stop the flush loop, try once more to send what is buffered, count the rest."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._buffer:
            try:
                async with asyncio.timeout(drain_timeout_s):
                    await self.flush()
            except TimeoutError:
                pass
        self._stats.counters.feedback_dropped += len(self._buffer)
        self._buffer.clear()
        await self._http.aclose()
