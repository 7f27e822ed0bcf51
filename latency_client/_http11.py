"""A minimal HTTP/1.1 keep-alive client on asyncio streams, for the hot path only.

Why not httpx here: on the 2-core dev machine one sequential 100-row /predict/bulk/strict
call cost the calling process 1.8-2.9 ms of CPU through httpx.AsyncClient (httpcore also
tries to import the absent `sniffio` on every request) against 0.28-0.41 ms as one write
and one read on an asyncio stream, decoding included. At 500 calls/s httpx alone would
take a core. httpx still carries the training rows (one call a second).

Why the answer is parsed here rather than by h11 (the state machine under uvicorn and
httpcore), though hand-written framing is where protocol bugs hide: the same connections on h11
(one h11.Connection per socket; commit 70beb08 of branch client-h11) cost 0.16-0.30 ms
more client CPU per call than this parser (0.42-0.67 ms, 1.5-1.7x; medians of 10
interleaved rounds of 2,000 calls, four runs at load 8-14 on 2 cores): over the 0.15 ms a
call the hot path can spare. h11 builds and validates a Request and runs its state machine
over six events a call (~0.1 ms of pure Python per exchange by itself).
`benchmarks.bench_client --bare-only --compare-pool FILE` reruns the comparison.
What h11 would have got right is done here and tested against a real server
(tests/latency_client/test_http11.py): Content-Length, chunked with extensions and
trailers, Transfer-Encoding over Content-Length, 1xx answers skipped, 204/304 bodiless,
close-delimited answers, Connection: close and HTTP/1.0 not reused, and a retry only when
a reused connection ended before an answer's head.

Scope: POST with a body; http and https; idle connections reused per origin, dropped after
IDLE_S (below uvicorn's 5 s keep-alive, so we rarely write into a connection the server is
closing; when we do, the request goes again once on a new connection).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

IDLE_S = 4.0
MAX_HEAD_BYTES = 64 * 1024
# What a failed exchange raises: the socket, a short answer, an oversized or garbled head.
_BROKEN = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


class HttpError(Exception):
    """The exchange failed: connection, TLS, or an answer that is not HTTP/1.1."""


class _ClosedBeforeAnswer(ConnectionError):
    """The connection ended before the head of an answer was complete: on a reused
    connection, the server was closing it while idle and never answered the request."""


@dataclass
class _Origin:
    scheme: str
    host: str
    port: int
    host_header: str
    # The base URL's own path ("/pools/<name>" for a pool), put before every request's.
    prefix: str = ""
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = field(
        default_factory=list
    )


def ssl_context(verify: ssl.SSLContext | str | bool) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def _read_head(reader: asyncio.StreamReader) -> tuple[bytes, int, dict[bytes, bytes]]:
    """Version, status and headers (names and values lower-cased) of the final answer."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise _ClosedBeforeAnswer(repr(exc)) from None
        lines = head.split(b"\r\n")
        version, status = lines[0].split(b" ", 2)[:2]
        if not status.isdigit() or not version.startswith(b"HTTP/1."):
            raise ValueError(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
        if not 100 <= int(status) < 200:  # 1xx: an interim answer, the final one follows
            break
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().lower()
    return version, int(status), headers


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """Status, body, and whether the connection may be reused."""
    version, status, headers = await _read_head(reader)
    reusable = version == b"HTTP/1.1" and headers.get(b"connection") != b"close"
    coding = headers.get(b"transfer-encoding")
    if status in (204, 304):  # never a body, whatever the headers say
        body = b""
    elif coding is not None:  # it wins over a Content-Length (RFC 9112 6.3)
        if coding.rsplit(b",", 1)[-1].strip() != b"chunked":
            return status, await reader.read(), False  # delimited by the end of the connection
        body = await _read_chunked(reader)
    elif b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
    else:  # delimited by the end of the connection
        body, reusable = await reader.read(), False
    return status, body, reusable


class Http11Connections:
    def __init__(self, verify: ssl.SSLContext | str | bool = True) -> None:
        self._verify = verify
        self._context: ssl.SSLContext | None = None
        self._origins: dict[str, _Origin] = {}

    def _origin(self, base_url: str) -> _Origin:
        origin = self._origins.get(base_url)
        if origin is None:
            parts = urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) URL: {base_url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            prefix = parts.path.rstrip("/")
            origin = _Origin(parts.scheme, parts.hostname, port, parts.netloc, prefix)
            self._origins[base_url] = origin
        return origin

    async def _connect(self, origin: _Origin) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if origin.scheme == "https" and self._context is None:
            self._context = ssl_context(self._verify)
        context = self._context if origin.scheme == "https" else None
        return await asyncio.open_connection(
            origin.host, origin.port, ssl=context, limit=MAX_HEAD_BYTES
        )

    def _reusable(
        self, origin: _Origin
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        now = time.monotonic()
        while origin.idle:
            reader, writer, since = origin.idle.pop()
            if now - since < IDLE_S and not reader.at_eof():
                return reader, writer
            writer.close()
        return None

    async def post(
        self, base_url: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, bytes]:
        """One POST; on a reused connection that ends before an answer, once more on a new
        one (an answer cut short is an error). Cancelling it (a timeout) closes the
        connection it was using."""
        origin = self._origin(base_url)
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (
            f"POST {origin.prefix}{path} HTTP/1.1\r\nHost: {origin.host_header}\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        reused = self._reusable(origin)
        if reused is not None:
            try:
                return await self._exchange(origin, *reused, request)
            except _ClosedBeforeAnswer:
                pass  # the server closed it while idle: go again on a new connection
            except _BROKEN as exc:
                raise HttpError(f"{base_url}{path}: {exc!r}") from None
        try:
            reader, writer = await self._connect(origin)
        except OSError as exc:
            raise HttpError(f"cannot connect to {base_url}: {exc!r}") from None
        try:
            return await self._exchange(origin, reader, writer, request)
        except _BROKEN as exc:
            raise HttpError(f"{base_url}{path}: {exc!r}") from None

    async def _exchange(
        self,
        origin: _Origin,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: bytes,
    ) -> tuple[int, bytes]:
        try:
            writer.write(request)  # one write: head and body leave in as few packets as can be
            status, body, reusable = await _read_response(reader)
        except BaseException:
            writer.close()
            raise
        if reusable:
            origin.idle.append((reader, writer, time.monotonic()))
        else:
            writer.close()
        return status, body

    async def aclose(self) -> None:
        writers = [w for origin in self._origins.values() for _, w, _ in origin.idle]
        for origin in self._origins.values():
            origin.idle.clear()
        for writer in writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
