"""Our servers as real processes on 127.0.0.1: started, probed until ready, ended by PID.

One implementation for the demo, the end-to-end and fault tests and the benchmarks. Only
processes started here are ever signalled, by their own PID.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx


class ServerExited(RuntimeError):
    """The server process ended before it became ready (its log's tail is in the message)."""


# Ports this process has handed out. A port is free only until its server binds it, and the
# kernel may give the same free port to two bind(("", 0)) calls in a row (2,000 calls here
# gave 134 repeats): a trainer and a prediction server set up together then shared one
# port, and the second one's readiness probe was answered by the first.
_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()
_PORT_TRIES = 100


def free_port() -> int:
    """A free port on 127.0.0.1 never handed out before by this process."""
    with _HANDED_OUT_LOCK:
        for _ in range(_PORT_TRIES):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
    raise RuntimeError(f"no new free port in {_PORT_TRIES} tries")


class ServerProcess:
    """`python -m <module> --host 127.0.0.1 --port <port>` with `env` over this process's
    environment, its output appended to `log_path`."""

    def __init__(
        self,
        module: str,
        port: int,
        env: dict[str, str],
        log_path: Path,
        tls_ca: Path | None = None,
        *,
        command: Sequence[str] | None = None,
        base_env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        run_as: tuple[int, int] | None = None,
    ):
        """`tls_ca`: the server serves https with a certificate this CA file signed.
        `command`: the whole command line instead (host and port then come from `env`, the
        server must bind 127.0.0.1:`port`); `base_env`: the environment `env` goes over
        instead of this process's; `cwd`: its working directory; `run_as`: (uid, gid) to
        drop to, with no supplementary groups (needs root)."""
        self.module, self.port, self.env, self.log_path = module, port, env, log_path
        self.url = f"{'https' if tls_ca else 'http'}://127.0.0.1:{port}"
        self.verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(tls_ca)) if tls_ca else True
        )
        default = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(port)]
        self.command = list(command) if command is not None else default
        self.base_env = base_env  # None: this process's, read at each start
        self.cwd, self.run_as = cwd, run_as
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The process id of the started server."""
        if self.proc is None:
            raise RuntimeError(f"{self.module} on port {self.port} was not started")
        return self.proc.pid

    def start(self, ready_timeout: float = 60.0) -> ServerProcess:
        user: dict[str, Any] = {}
        if self.run_as is not None:
            user = {"user": self.run_as[0], "group": self.run_as[1], "extra_groups": []}
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                self.command,
                env={**(os.environ if self.base_env is None else self.base_env), **self.env},
                cwd=self.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                **user,
            )
        try:
            return self._wait_ready(ready_timeout)
        except BaseException:  # never leave a half-started server behind
            self.kill()
            raise

    def _wait_ready(self, ready_timeout: float) -> ServerProcess:
        assert self.proc is not None
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerExited(
                    f"{self.module} exited with {self.proc.returncode}: "
                    f"{self.log_path.read_text()[-2000:]}"
                )
            try:
                if (
                    httpx.get(f"{self.url}/readyz", timeout=1.0, verify=self.verify).status_code
                    == 200
                ):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{self.module} not ready in {ready_timeout}s")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, as in a crash or an OOM kill."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
