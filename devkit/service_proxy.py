"""ServiceProxy: 127.0.0.1:<port> in front of several servers, each new connection to the
next one that accepts it, as a Kubernetes Service (kube-proxy) spreads connections over
its ready pods. For benchmarks and tests of several training replicas behind one URL.

Threads: one accepting, two per connection (one per direction); all daemons, stopped by
`close()` within a bound. Upstreams are loopback servers this process started.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Sequence

ACCEPT_POLL_SEC = 0.2
CONNECT_TIMEOUT_SEC = 2.0
BUFFER = 65_536


class ServiceProxy:
    def __init__(self, upstreams: Sequence[int]):
        """`upstreams`: the loopback ports of the servers behind it."""
        self.upstreams = list(upstreams)
        self._turn = itertools.cycle(range(len(self.upstreams)))
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(ACCEPT_POLL_SEC)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="service-proxy", daemon=True)

    def start(self) -> ServiceProxy:
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = self._connect()
            if upstream is None:
                client.close()  # no server accepts: as a Service without ready pods
                continue
            with self._lock:
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        """The next upstream that accepts, each tried at most once."""
        for _ in range(len(self.upstreams)):
            port = self.upstreams[next(self._turn)]
            try:
                return socket.create_connection(("127.0.0.1", port), CONNECT_TIMEOUT_SEC)
            except OSError:
                continue
        return None

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(BUFFER):
                sink.sendall(data)
        for sock in (source, sink):  # either side done: end both directions
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(ACCEPT_POLL_SEC * 5)
        self._listener.close()
        with self._lock:
            for sock in self._open:
                sock.close()
            self._open.clear()
