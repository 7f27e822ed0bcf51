"""Http11Connections' framing against real HTTP servers on loopback: the standard
library's http.server for the framings our servers never send (chunked, close-delimited,
a keep-alive connection closed while idle), and our prediction and training servers over
TLS with a bearer token."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from devkit.processes import ServerProcess, free_port
from latency_client import (
    Http11Connections,
    HttpError,
    PredictionUnavailable,
    PredictorClient,
)
from tests.e2e.test_tls_and_token import self_signed
from tests.latency_client.cluster import row, training_row

TOKEN = "client-token"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Handler.connections.append(self.client_address[1])  # one source port per connection
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b'{"echo":', body, b"}"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/interim-then-chunked-over-length":
            self.send_response_only(100)  # an interim answer first
            self.end_headers()
            self.send_response(200)
            self.send_header("Content-Length", "3")  # wrong, and overruled by the chunking
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"2;ext=1\r\nok\r\n5\r\n-then\r\n0\r\nTrailer: x\r\n\r\n")
        elif self.path == "/no-content":
            self.send_response(204)  # no Content-Length: a 204 has no body by definition
            self.end_headers()
        elif self.path == "/http10":  # kept open by this server, but a 1.0 answer ends reuse
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
        elif self.path == "/cut-short":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"only five")
            self.close_connection = True
        elif self.path == "/garbled":
            self.wfile.write(b"no status line here\r\n\r\n")
            self.close_connection = True
        elif self.path == "/until-close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"all of it")
            self.close_connection = True
        else:
            self.send_response(201)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = self.path == "/then-close"

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def plain_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Handler.connections.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_framings_and_connection_reuse(plain_server: str) -> None:
    async def go() -> list[tuple[int, bytes]]:
        http = Http11Connections()
        try:
            return [
                await http.post(plain_server, "/length", b"one", {}),
                await http.post(plain_server, "/length", b"two", {}),  # the same connection
                await http.post(plain_server, "/chunked", b"3", {}),
                await http.post(plain_server, "/until-close", b"", {}),
                await http.post(plain_server, "/then-close", b"five", {}),
                await http.post(plain_server, "/length", b"six", {}),  # closed while idle
            ]
        finally:
            await http.aclose()

    answers = asyncio.run(go())
    assert answers == [
        (201, b"one"),
        (201, b"two"),
        (200, b'{"echo":3}'),
        (200, b"all of it"),
        (201, b"five"),
        (201, b"six"),
    ]
    first, second, third, fourth, fifth, sixth = Handler.connections
    # kept alive across Content-Length and chunked answers, up to the answer that closes it
    assert first == second == third == fourth
    # then a new connection; the server closed that one too (no header said so), so the
    # reuse failed before any answer and the request went out again on a third
    assert len({fourth, fifth, sixth}) == 3


def test_interim_bodiless_and_chunked_over_length_answers(plain_server: str) -> None:
    async def go() -> list[tuple[int, bytes]]:
        http = Http11Connections()
        try:
            async with asyncio.timeout(10):  # a misframed answer would wait for more bytes
                return [
                    await http.post(plain_server, "/interim-then-chunked-over-length", b"", {}),
                    await http.post(plain_server, "/no-content", b"", {}),
                    await http.post(plain_server, "/length", b"after", {}),
                    await http.post(plain_server, "/http10", b"", {}),
                    await http.post(plain_server, "/length", b"new", {}),
                ]
        finally:
            await http.aclose()

    answers = asyncio.run(go())
    assert answers == [(200, b"ok-then"), (204, b""), (201, b"after"), (200, b"ok"), (201, b"new")]
    *first_four, fifth = Handler.connections
    assert len(set(first_four)) == 1  # each answer ended where it should: the next one followed
    assert fifth not in first_four  # an HTTP/1.0 answer: a new connection after it


def test_an_answer_cut_short_is_an_error_not_sent_again(plain_server: str) -> None:
    async def go() -> None:
        http = Http11Connections()
        try:
            assert await http.post(plain_server, "/length", b"one", {}) == (201, b"one")
            await http.post(plain_server, "/cut-short", b"", {})  # on the reused connection
        finally:
            await http.aclose()

    with pytest.raises(HttpError, match="cut-short"):
        asyncio.run(go())
    # the server answered (in part): retrying is only for a connection closed while idle
    assert len(Handler.connections) == 2 and len(set(Handler.connections)) == 1


def test_an_answer_that_is_not_http_is_an_http_error(plain_server: str) -> None:
    async def go() -> None:
        http = Http11Connections()
        try:
            await http.post(plain_server, "/garbled", b"", {})
        finally:
            await http.aclose()

    with pytest.raises(HttpError, match="garbled"):
        asyncio.run(go())


def test_tls_and_bearer_token_against_our_servers(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    env = {
        "LATENCY_API_TOKEN_FILE": str(secret),
        "LATENCY_PROTECT_EPP_ROUTES": "true",
        "LATENCY_TLS_CERT_FILE": str(cert),
        "LATENCY_TLS_KEY_FILE": str(key),
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_WORKERS": "1",
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
        "LATENCY_EARLY_RETRAINS": "false",
    }
    trainer = ServerProcess("training_server", free_port(), env, tmp_path / "t.log", tls_ca=cert)
    predictor = ServerProcess(
        "prediction_server", free_port(), env, tmp_path / "p.log", tls_ca=cert
    )

    async def go(token: str | None) -> tuple[object, bool]:
        async with PredictorClient(
            [predictor.url], trainer.url, token=token, verify=str(cert)
        ) as client:
            try:
                answer: object = await client.predict([row(1), row(2)])
            except PredictionUnavailable as exc:
                answer = exc
            client.record(training_row(1))
            return answer, await client.flush()

    try:
        trainer.start()
        predictor.start()
        answer, flushed = asyncio.run(go(TOKEN))
        assert isinstance(answer, list) and len(answer) == 2 and flushed
        refused, flushed = asyncio.run(go(None))  # both routes answer 401 without it
        assert isinstance(refused, PredictionUnavailable) and "401" in str(refused)
        assert not flushed
    finally:
        predictor.stop()
        trainer.stop()
