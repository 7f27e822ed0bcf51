"""The hot path's HTTP/1.1 keep-alive client: h11 frames the exchange, asyncio streams
carry the bytes.

Why not httpx here: on the 2-core dev machine one sequential 100-row /predict/bulk/strict
call cost the calling process 1.9-3.4 ms of CPU through httpx.AsyncClient (httpcore also
tries to import the absent `sniffio` on every request) against ~0.4 ms this way, decoding
included (benchmarks/bench_client.py prints both). At 500 calls/s httpx alone would take a
core. httpx still carries the training rows (one call a second).

Why h11 rather than parsing the answer by hand: the status line, headers, Content-Length /
chunked / close-delimited framing and the keep-alive decision are where protocol bugs hide,
and h11 (the state machine under uvicorn and httpcore) already gets them right. Its cost
here is in bench_client.py's `bare_call_ms` (`http11` against `httpx`).

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

import h11

IDLE_S = 4.0
MAX_HEAD_BYTES = 64 * 1024
READ_BYTES = 64 * 1024
# What a failed exchange raises: the socket (ConnectionError included), or an answer that
# is not HTTP/1.1 (h11.RemoteProtocolError).
_BROKEN = (OSError, h11.ProtocolError)


class HttpError(Exception):
    """The exchange failed: connection, TLS, or an answer that is not HTTP/1.1."""


class _ClosedBeforeAnswer(ConnectionError):
    """The server closed or reset the connection before one byte of the answer came: on a
    reused connection, it was closing it while idle and never read the request."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    framing: h11.Connection
    idle_since: float = 0.0


@dataclass
class _Origin:
    scheme: str
    host: str
    port: int
    host_header: str
    idle: list[_Connection] = field(default_factory=list)


def ssl_context(verify: ssl.SSLContext | str | bool) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


async def _read_some(connection: _Connection, received: bool) -> bytes:
    try:
        data = await connection.reader.read(READ_BYTES)
    except ConnectionError as exc:
        if not received:
            raise _ClosedBeforeAnswer(repr(exc)) from None
        raise
    if not data and not received:
        raise _ClosedBeforeAnswer("closed before answering")
    return data


async def _receive(connection: _Connection) -> tuple[int, bytes]:
    """Events from h11 until the answer ends; 1xx answers are skipped."""
    framing = connection.framing
    status, parts, received = 0, [], False
    while True:
        event = framing.next_event()
        if event is h11.NEED_DATA:
            data = await _read_some(connection, received)
            received = True
            framing.receive_data(data)  # b"" tells h11 the server closed: ends such a body
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            parts.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            return status, b"".join(parts)


class Http11Pool:
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
            origin = _Origin(parts.scheme, parts.hostname, port, parts.netloc)
            self._origins[base_url] = origin
        return origin

    async def _connect(self, origin: _Origin) -> _Connection:
        if origin.scheme == "https" and self._context is None:
            self._context = ssl_context(self._verify)
        context = self._context if origin.scheme == "https" else None
        reader, writer = await asyncio.open_connection(origin.host, origin.port, ssl=context)
        framing = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        return _Connection(reader, writer, framing)

    def _reusable(self, origin: _Origin) -> _Connection | None:
        now = time.monotonic()
        while origin.idle:
            connection = origin.idle.pop()
            if now - connection.idle_since < IDLE_S and not connection.reader.at_eof():
                return connection
            connection.writer.close()
        return None

    async def post(
        self, base_url: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, bytes]:
        """One POST; on a reused connection the server closed while idle, once more on a
        new one. Cancelling it (a timeout) closes the connection it was using."""
        origin = self._origin(base_url)
        head = [("Host", origin.host_header), *headers.items()]
        head.append(("Content-Length", str(len(body))))
        request = h11.Request(method="POST", target=path, headers=head)
        reused = self._reusable(origin)
        if reused is not None:
            try:
                return await self._exchange(origin, reused, request, body)
            except _ClosedBeforeAnswer:
                pass  # nothing was processed: go again on a new connection
            except _BROKEN as exc:
                raise HttpError(f"{base_url}{path}: {exc!r}") from None
        try:
            connection = await self._connect(origin)
        except OSError as exc:
            raise HttpError(f"cannot connect to {base_url}: {exc!r}") from None
        try:
            return await self._exchange(origin, connection, request, body)
        except _BROKEN as exc:
            raise HttpError(f"{base_url}{path}: {exc!r}") from None

    async def _exchange(
        self, origin: _Origin, connection: _Connection, request: h11.Request, body: bytes
    ) -> tuple[int, bytes]:
        framing = connection.framing
        try:
            out = framing.send(request) + framing.send(h11.Data(data=body))
            connection.writer.write(out + framing.send(h11.EndOfMessage()))  # one write
            status, answer = await _receive(connection)
        except BaseException:
            connection.writer.close()
            raise
        # Both sides DONE means neither asked to close (h11 weighs Connection headers,
        # HTTP/1.0 and close-delimited bodies); anything else is a connection to drop.
        if framing.our_state is h11.DONE and framing.their_state is h11.DONE:
            framing.start_next_cycle()
            connection.idle_since = time.monotonic()
            origin.idle.append(connection)
        else:
            connection.writer.close()
        return status, answer

    async def aclose(self) -> None:
        writers = [c.writer for origin in self._origins.values() for c in origin.idle]
        for origin in self._origins.values():
            origin.idle.clear()
        for writer in writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
