"""ServiceProxy spreads new connections over the servers behind it, in turn, and skips one
that refuses, as a Kubernetes Service does over its ready pods."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from devkit.service_proxy import ServiceProxy


class Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        _, port = self.connection.getsockname()  # the server's own port
        body = str(port).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def backends() -> Iterator[list[ThreadingHTTPServer]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Answer) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def answered_by(url: str) -> int:
    with httpx.Client() as client:  # a new connection per call
        return int(client.get(url).text)


def test_connections_go_to_each_server_in_turn_and_skip_a_dead_one(
    backends: list[ThreadingHTTPServer],
) -> None:
    ports = [int(server.server_address[1]) for server in backends]
    proxy = ServiceProxy(ports).start()
    try:
        assert [answered_by(proxy.url) for _ in range(4)] == [*ports, *ports]
        backends[0].shutdown()
        backends[0].server_close()  # refuses connections now
        assert [answered_by(proxy.url) for _ in range(3)] == [ports[1]] * 3
    finally:
        proxy.close()
