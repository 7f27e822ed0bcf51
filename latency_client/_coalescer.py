"""Merges concurrent predict() callers into shared /predict/bulk/strict calls.

A batch opens with its first caller and closes after `window_s` (the Go client's rule), or
as soon as it holds `max_rows_per_call` rows; at most `max_in_flight` calls run at once, and
callers who find every slot busy wait and merge further. One refinement: the window is only
waited for when it is expected to merge, i.e. when the recent arrival rate times the window
is at least `min_expected_merge` callers. Below that a batch closes at the end of the
current event-loop turn (still merging every caller already queued), so a lightly loaded
router pays no window at all. `min_expected_merge=0` always waits, as the Go client does.
Under overload (callers queued behind busy call slots) the newest callers are sent first:
measured at 2,000 picks/s on an overloaded 2-core machine, 1.5-2.5x more picks answered
within their deadline than oldest-first, whose callers mostly expired in flight.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from latency_client._errors import (
    ClientClosed,
    PredictionRejected,
    PredictionTimeout,
    PredictionUnavailable,
)
from latency_client._stats import Stats
from latency_client._strict import Answer, RowsRejected
from latency_client._types import Prediction, Row

Result = tuple[list[Prediction], float]  # a caller's predictions, the answering exchange (s)
Send = Callable[[Sequence[Row], float], Awaitable[Answer]]
RATE_HORIZON_S = 0.1  # the arrival-rate estimate forgets with this time constant


@dataclass(slots=True, eq=False)
class _Part:
    rows: Sequence[Row]
    future: asyncio.Future[Result]
    deadline: float
    expiry: asyncio.TimerHandle


def _expire(future: asyncio.Future[Result]) -> None:
    if not future.done():
        future.set_exception(PredictionTimeout("deadline passed before an answer arrived"))


def _fail(batch: Sequence[_Part], error: PredictionUnavailable) -> None:
    """Fail whoever still waits; a plain failure past a caller's deadline is its timeout."""
    now = asyncio.get_running_loop().time()
    for part in batch:
        part.expiry.cancel()
        if part.future.done():
            continue
        late = now >= part.deadline and type(error) is PredictionUnavailable
        part.future.set_exception(PredictionTimeout(f"deadline passed: {error}") if late else error)


class Coalescer:
    def __init__(
        self,
        send: Send,
        stats: Stats,
        *,
        window_s: float,
        max_rows_per_call: int,
        max_in_flight: int,
        min_expected_merge: float,
    ) -> None:
        self._send, self._stats = send, stats
        self._window_s, self._max_rows = window_s, max_rows_per_call
        self._max_in_flight, self._min_expected_merge = max_in_flight, min_expected_merge
        self._pending: deque[_Part] = deque()
        self._pending_rows = 0
        self._timer: asyncio.Handle | None = None
        self._overdue = False  # the window closed while every call slot was busy
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._rate, self._rate_at = 0.0, 0.0
        self._closed = False

    def submit(self, rows: Sequence[Row], deadline: float) -> asyncio.Future[Result]:
        """Queue one caller's rows (at most max_rows_per_call); `deadline` on the loop clock."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        if self._closed:
            future.set_exception(ClientClosed("the client is closed"))
            return future
        self._pending.append(_Part(rows, future, deadline, loop.call_at(deadline, _expire, future)))
        self._pending_rows += len(rows)
        expect_merge = self._observe_arrival(loop.time())
        if self._pending_rows >= self._max_rows:
            self._dispatch(full_only=True)
        if self._pending and self._timer is None and not self._overdue:
            self._timer = (
                loop.call_later(self._window_s, self._window_closed)
                if expect_merge
                else loop.call_soon(self._window_closed)
            )
        return future

    def _observe_arrival(self, now: float) -> bool:
        """Update the decaying arrival-rate estimate; True when waiting should merge."""
        self._rate = self._rate * math.exp((self._rate_at - now) / RATE_HORIZON_S)
        self._rate += 1.0 / RATE_HORIZON_S
        self._rate_at = now
        return self._rate * self._window_s >= self._min_expected_merge

    def _window_closed(self) -> None:
        self._timer = None
        self._dispatch(full_only=False)
        self._overdue = bool(self._pending)

    def _dispatch(self, full_only: bool) -> None:
        while self._pending and self._in_flight < self._max_in_flight:
            if full_only and self._pending_rows < self._max_rows:
                return
            batch = self._take_batch()
            if batch:
                self._in_flight += 1
                task = asyncio.get_running_loop().create_task(self._run(batch))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _take_batch(self) -> list[_Part]:
        """The next batch: the oldest callers first, but the newest first while a backlog
        waits for call slots (overload): they are the ones with time left to be answered,
        the oldest would expire in flight anyway."""
        newest_first = self._overdue
        take = self._pending.pop if newest_first else self._pending.popleft
        batch: list[_Part] = []
        rows = 0
        while self._pending and (
            not batch or rows + len(self._pending[-1 if newest_first else 0].rows) <= self._max_rows
        ):
            part = take()
            self._pending_rows -= len(part.rows)
            if not part.future.done():  # an expired or cancelled caller sends nothing
                batch.append(part)
                rows += len(part.rows)
        return batch

    async def _run(self, batch: list[_Part]) -> None:
        try:
            rows = [row for part in batch for row in part.rows]
            answer = await self._send(rows, max(part.deadline for part in batch))
        except RowsRejected as exc:
            await self._retry_without_rejected(batch, exc)
        except PredictionUnavailable as exc:
            _fail(batch, exc)
        except Exception as exc:  # never leave a caller waiting on a bug
            _fail(batch, PredictionUnavailable(f"unexpected error: {exc!r}"))
        else:
            self._resolve(batch, answer)
        finally:
            if self._closed:  # cancelled by aclose(): release whoever still waits
                _fail(batch, ClientClosed("the client closed during the call"))
            _fail(batch, PredictionUnavailable("the call ended without an answer"))
            self._in_flight -= 1
            self._after_call()

    def _after_call(self) -> None:
        if self._closed:
            return
        self._dispatch(full_only=not self._overdue)
        if not self._pending:
            self._overdue = False

    def _resolve(self, batch: Sequence[_Part], answer: Answer) -> None:
        offset = 0
        for part in batch:
            end = offset + len(part.rows)
            part.expiry.cancel()
            if not part.future.done():
                part.future.set_result((answer.predictions[offset:end], answer.exchange_s))
            offset = end
        self._stats.counters.merged_callers += len(batch)

    async def _retry_without_rejected(self, batch: list[_Part], exc: RowsRejected) -> None:
        """Answer the 422 to the callers whose rows it names; send the others again."""
        good: list[_Part] = []
        offset = 0
        for part in batch:
            end = offset + len(part.rows)
            named = not exc.rows or any(offset <= i < end for i in exc.rows)
            if named:
                _fail([part], PredictionRejected(str(exc), exc.detail))
            else:
                good.append(part)
            offset = end
        if not good:
            return
        try:
            rows = [row for part in good for row in part.rows]
            self._resolve(good, await self._send(rows, max(p.deadline for p in good)))
        except PredictionUnavailable as again:
            _fail(good, again)

    async def aclose(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        _fail(list(self._pending), ClientClosed("the client closed"))
        self._pending.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
