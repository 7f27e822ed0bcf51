"""Request limits as one pure ASGI middleware (no per-request objects: it sits on the hot path).

- A body larger than LATENCY_MAX_BODY_BYTES answers 413 before it is read: at once when its
  Content-Length says so, or as soon as a chunked body passes the limit.
- Routes given a concurrency cap (bulk ingestion on the trainer) answer 429 with Retry-After
  when that many calls are already in progress, so a flood is shed at the door instead of
  queueing decoded batches in memory.
Both are counted in `latency_requests_refused_total{route, reason}`. uvicorn's own
limit_concurrency (LATENCY_MAX_CONCURRENCY) answers 503 past the server-wide cap.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter

# Route label values: our routes that take bodies; anything else is "other", so a scan of
# made-up paths cannot grow the series without bound.
BODY_ROUTES = frozenset(
    {
        "/predict",
        "/predict/bulk",
        "/predict/bulk/strict",
        "/add_training_data_bulk",
        "/model/import",
        "/flush",
    }
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _BodyTooLarge(Exception):
    pass


class RequestLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        refused: Counter,
        capped: dict[str, int] | None = None,
    ):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.refused = refused  # refused_counter(registry)
        self.capped = capped or {}  # path -> calls allowed in progress at once
        self.in_progress = dict.fromkeys(self.capped, 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        length = _content_length(scope)
        cap = self.capped.get(path)
        if await self._refused_at_the_door(send, path, length, cap):
            return
        if length is not None and cap is None:  # the hot path: nothing more to watch
            await self.app(scope, receive, send)
            return
        await self._watched(scope, receive, send, length, cap)

    async def _refused_at_the_door(
        self, send: Send, path: str, length: int | None, cap: int | None
    ) -> bool:
        """413 for a declared length over the limit, 429 past the route's cap."""
        if length is not None and length > self.max_body_bytes:
            await self._refuse(
                send,
                path,
                413,
                "too_large",
                f"request body of {length} bytes is over the limit of "
                f"{self.max_body_bytes} (LATENCY_MAX_BODY_BYTES)",
            )
            return True
        if cap is not None and self.in_progress[path] >= cap:
            await self._refuse(
                send,
                path,
                429,
                "shed",
                f"{cap} calls to {path} are already in progress; retry shortly",
                retry_after=True,
            )
            return True
        return False

    async def _watched(
        self, scope: Scope, receive: Receive, send: Send, length: int | None, cap: int | None
    ) -> None:
        """A chunked body counted as it arrives, and/or a capped route's call counted."""
        path = scope["path"]
        over = [False]
        if length is None:  # chunked: count as it arrives
            receive = self._counting(receive, over)
        if cap is not None:
            self.in_progress[path] += 1
        refused = [False]

        async def refuse_too_large() -> None:
            if not refused[0]:
                refused[0] = True
                await self._refuse(
                    send,
                    path,
                    413,
                    "too_large",
                    "request body is over the "
                    f"limit of {self.max_body_bytes} bytes "
                    "(LATENCY_MAX_BODY_BYTES)",
                )

        async def guarded_send(message: Message) -> None:
            # Past the limit the app sees a failed read and answers (FastAPI: 400); the
            # client gets our 413 in its place.
            if not over[0]:
                await send(message)
            elif message["type"] == "http.response.start":
                await refuse_too_large()

        try:
            await self.app(scope, receive, guarded_send)
        except _BodyTooLarge:  # a route reading its body itself lets the failed read out
            await refuse_too_large()
        finally:
            if cap is not None:
                self.in_progress[path] -= 1

    def _counting(self, receive: Receive, over: list[bool]) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                over[0] = True
                raise _BodyTooLarge
            return message

        return counted

    async def _refuse(
        self,
        send: Send,
        path: str,
        status: int,
        reason: str,
        detail: str,
        retry_after: bool = False,
    ) -> None:
        self.refused.labels(path if path in BODY_ROUTES else "other", reason).inc()
        extra = ((b"retry-after", b"1"),) if retry_after else ()
        await send_json(send, status, {"detail": detail}, extra)


async def send_json(
    send: Send, status: int, content: object, extra_headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """A whole JSON answer from a pure ASGI layer, before any route runs."""
    headers = [(b"content-type", b"application/json"), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": orjson.dumps(content)})


def refused_counter(registry: CollectorRegistry) -> Counter:
    return Counter(
        "latency_requests_refused",
        "Requests refused at the door: body too "
        "large (413) or shed by a route's concurrency cap (429)",
        ["route", "reason"],
        registry=registry,
    )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
