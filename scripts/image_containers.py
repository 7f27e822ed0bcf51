"""Containers of the image under buildah, for scripts/image_check.py.

Each Container is one working container (`buildah from IMAGE`) whose processes run with
`buildah run --isolation chroot`, in the host's network, as the image's user (uid 10001),
with host folders bound at its volumes' mount points. The container's own filesystem is
listed when it is made and again at the end (check_untouched): any file created, changed or
removed outside the volumes fails the check. A server is stopped by SIGTERM to its own
process, found under buildah's (buildah ends its child by SIGKILL when signalled itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

RUN_TIMEOUT_S = 600.0  # one command in the image (advise simulates for a while)
STOP_TIMEOUT_S = 30.0
USER = "10001:10001"


class CheckFailed(Exception):
    """One check of the image did not hold (the message says which)."""


def _buildah(*args: str) -> str:
    done = subprocess.run(["buildah", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CheckFailed(f"buildah {' '.join(args[:2])}: {done.stderr.strip()[:300]}")
    return done.stdout.strip()


def _descendants(pid: int) -> list[int]:
    """Every process under `pid`, nearest first."""
    found, queue = [], [pid]
    while queue:
        children = Path(f"/proc/{queue.pop(0)}/task")
        for task in children.glob("*/children") if children.is_dir() else []:
            with contextlib.suppress(OSError):
                for child in task.read_text().split():
                    found.append(int(child))
                    queue.append(int(child))
    return found


def _same_but_mtime(before: tuple[int, int, int], after: tuple[int, int, int] | None) -> bool:
    return after is not None and before[:2] == after[:2]


def _is_buildah(pid: int) -> bool:
    """Whether `pid` is one of buildah's own processes (its runtime and exec helpers)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return True
    return Path(argv0.decode(errors="replace")).name.startswith("buildah")


class Container:
    def __init__(
        self,
        image: str,
        name: str,
        volumes: dict[Path, str],
        *,
        read_only: dict[Path, str] | None = None,
    ):
        self.name = name
        self.id = _buildah("from", "--name", f"{name}-{os.getpid()}", image)
        self.mounts = [f"{host}:{inside}" for host, inside in volumes.items()]
        self.mounts += [f"{host}:{inside}:ro" for host, inside in (read_only or {}).items()]
        # The mount points themselves: buildah makes the ones the image lacks.
        self.mount_points = {p.strip("/") for p in [*volumes.values(), *(read_only or {}).values()]}
        config = json.loads(_buildah("inspect", "--type", "container", self.id))
        self.command: list[str] = config["OCIv1"]["config"]["Cmd"]
        self.log = Path(f"/tmp/{self.id[:12]}-{name}.log")
        self.proc: subprocess.Popen[bytes] | None = None
        # buildah's own footprint, learnt from a command that writes nothing: it creates and
        # removes its runtime files under /run, moving that folder's mtime at every run.
        self.before = self._listing()
        self.run(["true"])
        noop = self._listing()
        self.runtime_touched = {p for p in noop if noop[p] != self.before.get(p)}
        self.before = noop

    def _run_args(self, env: dict[str, str]) -> list[str]:
        args = ["buildah", "run", "--isolation", "chroot", "--user", USER]
        for mount in self.mounts:
            args += ["--volume", mount]
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        return [*args, self.id, "--"]

    def start(self, env: dict[str, str]) -> None:
        """The image's default command, in the background."""
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [*self._run_args(env), *self.command], stdout=log, stderr=subprocess.STDOUT
            )

    def run(
        self, command: list[str], env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`command` to its end; CheckFailed unless it exits 0."""
        done = subprocess.run(
            [*self._run_args(env or {}), *command],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise CheckFailed(
                f"{' '.join(command[:3])} exited {done.returncode} in the image: "
                f"{(done.stderr or done.stdout).strip()[-400:]}"
            )
        return done

    def stop(self) -> None:
        """SIGTERM to the server (the process the image's command became), then wait."""
        if self.proc is None or self.proc.poll() is not None:
            return
        server = [pid for pid in _descendants(self.proc.pid) if not _is_buildah(pid)]
        if server:  # the nearest: the server itself, not one of its workers
            with contextlib.suppress(ProcessLookupError):
                os.kill(server[0], signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # buildah's SIGKILL of its child would leave the server's workers running.
            for pid in [*reversed(server), self.proc.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(10)
            raise CheckFailed(f"{self.name} did not stop within {STOP_TIMEOUT_S:.0f} s") from None

    def _listing(self) -> dict[str, tuple[int, int, int]]:
        """Every path of the container's own filesystem: (mode, size, mtime in ns)."""
        root = Path(_buildah("mount", self.id))
        listing = {}
        try:
            for folder, dirs, files in os.walk(root):
                for name in [*dirs, *files]:
                    path = Path(folder, name)
                    st = path.lstat()
                    listing[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
        finally:
            _buildah("umount", self.id)
        return listing

    def check_untouched(self) -> None:
        """CheckFailed naming what changed outside the volumes since the container was made."""
        self.stop()
        after = self._listing()
        changed = sorted(
            p
            for p in set(self.before) | set(after)
            if self.before.get(p) != after.get(p)
            and p not in self.mount_points
            and not (p in self.runtime_touched and _same_but_mtime(self.before[p], after.get(p)))
        )
        if changed:
            raise CheckFailed(f"{self.name} wrote outside its volumes: {changed[:10]}")

    def print_log_tail(self) -> None:
        if self.log.is_file():
            tail = self.log.read_text(errors="replace")[-1500:]
            print(f"--- {self.name} log (tail) ---\n{tail}", flush=True)

    def remove(self) -> None:
        self.stop_quietly()
        subprocess.run(["buildah", "rm", self.id], capture_output=True, check=False)
        self.log.unlink(missing_ok=True)

    def stop_quietly(self) -> None:
        with contextlib.suppress(CheckFailed):
            self.stop()
