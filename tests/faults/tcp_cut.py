"""A TCP forwarder on 127.0.0.1 that a test can cut (listener and every connection closed,
as when a database host vanishes) and restore on the same port."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Callable

ACCEPT_POLL_SEC = 0.05
UPSTREAM_CONNECT_TIMEOUT = 5.0
CHUNK = 65536


class TcpCut:
    """127.0.0.1:<port> -> upstream. `cut()` drops everything and refuses new connections
    (connection refused, like a stopped server); `restore()` listens again on the same port.
    Every thread it starts is a daemon joined with a bound in `close()`."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.port = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.accepted = 0

    # lifecycle ------------------------------------------------------------------------
    def start(self) -> TcpCut:
        self._listen()
        return self

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(ACCEPT_POLL_SEC)
        self.port = listener.getsockname()[1]
        stop = threading.Event()
        self._stop = stop
        with self._lock:
            self._listener = listener
        self._spawn(self._accept_loop, listener, stop)

    def cut(self) -> int:
        """Close the listener and every open connection; returns how many were cut."""
        self._stop.set()
        with self._lock:
            listener, self._listener = self._listener, None
            conns = list(self._conns)
        if listener is not None:
            listener.close()
        for sock in conns:  # wakes a pump blocked in sendall; each pump closes its pair
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._reap()
        with self._lock:
            left, self._conns = list(self._conns), set()
        for sock in left:
            sock.close()
        return len(conns) // 2

    def restore(self) -> None:
        self._listen()

    def close(self) -> None:
        self.cut()

    # internals ------------------------------------------------------------------------
    def _spawn(self, fn: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=fn, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _reap(self, timeout: float = 5.0) -> None:
        threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout)
        alive = [t for t in threads if t.is_alive()]
        assert not alive, f"forwarder threads still running: {alive}"

    def _accept_loop(self, listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed by cut()
            try:
                server = socket.create_connection(self.upstream, UPSTREAM_CONNECT_TIMEOUT)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            server.settimeout(None)  # the connect timeout must not bound an idle session
            with self._lock:
                if stop.is_set():  # cut while connecting
                    client.close()
                    server.close()
                    return
                self._conns.update((client, server))
                self.accepted += 1
            self._spawn(self._pump, client, server, stop)

    def _pump(self, a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
        """Both directions in one thread; ends when either side closes or on cut()."""
        peer = {a: b, b: a}
        with selectors.DefaultSelector() as sel:
            sel.register(a, selectors.EVENT_READ)
            sel.register(b, selectors.EVENT_READ)
            while not stop.is_set():
                for key, _ in sel.select(ACCEPT_POLL_SEC):
                    src: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = src.recv(CHUNK)
                        if data:
                            peer[src].sendall(data)
                            continue
                    except OSError:
                        pass
                    self._drop(a, b)  # EOF or error on either side ends the pair
                    return
        self._drop(a, b)

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            for sock in socks:
                self._conns.discard(sock)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
